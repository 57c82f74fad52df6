"""Every time limit of a check and a checkpoint, in seconds, each stated once.

They nest, and each is shorter than the one around it: one wait inside a case
(``WAIT_SECONDS``) within a checkpoint case (``CASE_SECONDS``) within the whole checkpoint
(``CHECKPOINT_SECONDS``); one test (``TEST_SECONDS``, ``MEASURED_TEST_SECONDS``) within its
suite (``SUITE_SECONDS``). A child and the parent that watches it use the same number for the
same part: the checkpoint gives a case's sandbox the case's limit, and ``make check`` stops the
case past that very limit, which it hands the checkpoint (``--case-timeout``). These are
``make check``'s defaults; a rubric's ``[limits]`` and the ``--*-timeout`` options change them
for a class (``lucyshop.lab.check.guard.Limits``).

A leaf: the trusted side and the holders inside the sandbox both read it.
"""

from __future__ import annotations

TEST_SECONDS = 30.0  # one learner or exercise test
MEASURED_TEST_SECONDS = 120.0  # one test of exercise 5 or 6's measurement (subjects.MEASUREMENTS)
LOAD_SECONDS = 60.0  # importing the student's file once, before anything runs
SUITE_SECONDS = 600.0  # one suite, reruns included
CHECKPOINT_SECONDS = 600.0  # the whole checkpoint, from its start
CASE_SECONDS = 60.0  # one checkpoint case, its calls into the sandbox included
WAIT_SECONDS = 20.0  # any one wait inside a case (a holder's record, its exit, a signal taking)
