"""The order make test's workers take the test files in: the longest first.

``make test`` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: each worker
takes one whole file at a time, in collection order. A long file (whole ``make check``
runs, a graded class, the notebooks, the quick experiment) started last would run alone at the end.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
KIT = TESTS.parent
LONGEST_FIRST = (  # by each file's time in a whole run (pytest --junitxml), longest first
    "tests/lesson/test_notebooks.py",
    "tests/experiment/test_experiment.py",
    "tests/book/test_book_chapter.py",  # with ../shared beside the kit: the chapter's commands
    "tests/sandbox/test_hostile_data.py",
    "tests/grading/test_grade_class.py",
    "tests/check/test_check_report.py",
    "tests/sandbox/test_hostile_names.py",
    "tests/sandbox/test_hostile_pg.py",
    "tests/check/test_learner_mutants.py",
    "tests/checkpoint/test_checkpoint.py",
    "tests/sandbox/test_hostile_kit.py",
    "tests/sandbox/test_hostile_grade.py",
    "tests/sandbox/test_hostile.py",
    "tests/sandbox/test_hostile_bounds.py",
    "tests/sandbox/test_bounded.py",
    "tests/grading/test_grade_under_load.py",
    "tests/sandbox/test_hostile_race.py",
    "tests/sandbox/test_isolation_modes.py",
    "proof/test_soak.py",
    "tests/grading/test_autograder_zip.py",
    "tests/postgres/test_pg_checkpoint.py",
    "tests/sandbox/test_hostile_exercise5.py",
    "tests/sandbox/test_hostile_wire.py",
    "tests/grading/test_grade_parts.py",
)


def rank(path: Path) -> int:
    """A test file's place in the queue: its index in LONGEST_FIRST, else after them all."""
    name = path.relative_to(KIT).as_posix() if path.is_relative_to(KIT) else ""
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
