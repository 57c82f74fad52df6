"""The Gradescope autograder zip proved on what Gradescope starts from (``make
autograder-proof``): a bare Debian image (``image``), entered as Gradescope would enter it
(``inside``), under its memory, CPU and disk limits (``quota``), grading one submission
(``stockimage``, whose receipt is ``proof/receipts/gradescope-run.json``). The zip itself is
the course's (``lucyshop.lab.grade.gradescope``)."""
