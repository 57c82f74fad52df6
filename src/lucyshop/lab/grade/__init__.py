"""Instructor grading: a whole class in one command, a gradebook and Gradescope results.

    make grade SUBMISSIONS=dir/           # or: python -m lucyshop.lab.grade dir/
    make autograder                       # a Gradescope autograder zip

``submissions`` finds and stages hand-ins, ``verdict`` runs ``make check`` on one of them,
``rubric`` scores a verdict, ``similarity`` compares a file with the reference,
``gradescope`` writes ``results.json``, ``classroom`` grades a class into the gradebook,
``autograder`` builds and runs the Gradescope autograder. How long a class takes is the
proof's (``lucyshop.proof.bench.speed``).
"""
