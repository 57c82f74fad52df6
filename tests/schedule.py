"""The order make test's workers take the test files in: the longest first.

``make test`` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: each worker
takes one whole file at a time, in collection order. A long file (whole ``make check``
runs, a graded class, the notebooks, the quick experiment) started last would run alone at the end.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
LONGEST_FIRST = (  # by each file's time in a whole run (pytest --durations), longest first
    "lesson/test_notebooks.py",
    "book/test_book_chapter.py",  # with ../shared beside the kit (CI): the chapter's commands
    "grading/test_grade_class.py",
    "check/test_check_report.py",
    "sandbox/test_hostile_kit.py",
    "grading/test_grade_under_load.py",
    "experiment/test_experiment.py",
    "sandbox/test_bounded.py",
    "check/test_learner_mutants.py",
    "sandbox/test_hostile.py",
    "checkpoint/test_checkpoint.py",
    "grading/test_grade_parts.py",
    "grading/test_grade_postgres.py",
    "sandbox/test_chatty.py",
    "check/test_student_commands.py",
    "soak/test_soak.py",
    "grading/test_autograder_zip.py",
    "sandbox/test_hostile_grade.py",
    "postgres/test_pg_checkpoint.py",
    "sandbox/test_trust.py",
    "grading/test_resume.py",
)


def rank(path: Path) -> int:
    """A test file's place in the queue: its index in LONGEST_FIRST, else after them all."""
    name = path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else ""
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
