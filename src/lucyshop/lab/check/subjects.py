"""What ``make check`` checks: one ``Subject`` per row of its table, and which rows run nothing.

Each chapter function (in the order of ``learner/ch13_leases.py``) is a row with its test
module under ``spec/learner``; so is each row *beyond the book* (``BEYOND``: what 13b teaches
past the chapter's printed code, which never fails a chapter row, the checkpoint or make
check's exit status); each exercise of the book a row with its modules under
``spec/exercises``; exercise 7 (``ch13_postgres.py``, beside the chapter file) a row with its
four modules under ``spec/postgres``, and, for 13d's check of one function, a row of each
function with its one module there (``PG_ROWS``, not in the table). A row still a stub, read
here from the file's syntax tree (``stubs_in``), runs none of its tests; a row ``set_aside``
runs none either and has its status from here: the measured exercises under
``--no-measured``, exercise 7 without its file or without PostgreSQL.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from lucyshop.lab import loader
from lucyshop.lab.given.stubs import functions_in, is_stub_node, stub_section
from lucyshop.lab.loader import PG_FILE, ROOT
from lucyshop.lab.services import postgres
from lucyshop.lab.services.limits import MEASURED_TEST_SECONDS, TEST_SECONDS
from lucyshop.lab.statuses import Status


class Subject(NamedTuple):
    """One row of the table: what it is called, where its tests are, which stubs are its own."""

    label: str  # a function (``Claim.worker_id``) or ``exercise N``
    directory: str  # its tests' directory, relative to the kit's root
    modules: tuple[str, ...]  # its test modules there, without ``.py``
    stubs: tuple[str, ...]  # the functions whose stub makes it NOT STARTED
    section: str | None = None  # where to read first when NOT STARTED, if not the stub's own


# Every chapter-13 function, in the order of learner/ch13_leases.py, with its test module.
# Stated here, not read from the learner's file: that file is the student's, and a row list
# read from it would let a hand-in drop the rows it fails by deleting their functions.
# tests/kit/test_learner_shape.py holds this list to the stub file as shipped.
FUNCTIONS: tuple[str, ...] = (
    "percentile",
    "false_expiry_share",
    "shortest_lease",
    "detection_delay",
    "outlive_curve",
    "fenced",
    "open_worker_shop",
    "Claim.worker_id",
    "enqueue",
    "claim",
    "assert_current",
    "observe",
    "finish",
    "recover_once",
    "reconcile",
    "cancel",
)
SPEC = "spec"  # what a hand-in is tested against; the kit's own tests are in tests/
SUITES = (f"{SPEC}/learner", f"{SPEC}/exercises", f"{SPEC}/postgres")
# Beyond the book: what 13b teaches past the chapter's code, a row each, with its own tests and
# the stub that makes it NOT STARTED. Shown and graded like a function's row, it never fails
# a chapter row or the checkpoint, and never on its own makes make check exit non-zero
# (``table.exit_status``): the chapter's code, as printed, passes make check without it.
BEYOND: tuple[Subject, ...] = (
    Subject(
        "claim (beyond the book)",
        SUITES[0],
        ("test_claim_beyond_the_book",),
        ("claim",),
        "13b § Hostile input to claim",
    ),
)
# Exercise 7: the chapter's leases on PostgreSQL, in ch13_postgres.py beside the chapter file.
# Its functions share the chapter's names, so its stubs are named ch13_postgres.<function>.
PG_FUNCTIONS = ("claim", "assert_current", "observe", "finish")
PG_PREFIX = f"{Path(PG_FILE).stem}."  # how a stub of exercise 7 is named among the others
PG_STUBS = tuple(f"{PG_PREFIX}{name}" for name in PG_FUNCTIONS)
PG_MODULES = tuple(f"test_pg_{name}" for name in PG_FUNCTIONS)
PG_EXERCISE = "exercise 7"
# The exercise book's answers (learner/exercises.py), each with its check modules and its stubs,
# then exercise 7.
EXERCISES: tuple[Subject, ...] = (
    Subject("exercise 1", SUITES[1], ("test_exercise_1",), ("exercise_1_reuse_owner_label",)),
    Subject("exercise 2", SUITES[1], ("test_exercise_2",), ("exercise_2_cancel_while_delayed",)),
    Subject(
        "exercise 3",
        SUITES[1],
        ("test_exercise_3",),
        ("observe_without_fence", "exercise_3_remove_one_fence"),
    ),
    Subject("exercise 4", SUITES[1], ("test_exercise_4",), ("exercise_4_sessions_vs_ceiling",)),
    Subject(
        "exercise 5",
        SUITES[1],
        ("test_exercise_5_renew", "test_exercise_5"),
        ("renew", "keep_renewing", "exercise_5_renewal"),
    ),
    Subject(
        "exercise 6", SUITES[1], ("test_exercise_6",), ("records_message", "exercise_6_records")
    ),
    Subject(PG_EXERCISE, SUITES[2], PG_MODULES, PG_STUBS),
)
# Exercise 7 one function at a time (``exercise 7 claim``): rows a notebook's check may name
# (13d's ``check("claim")``), never rows of the table.
PG_ROWS: tuple[Subject, ...] = tuple(
    Subject(f"{PG_EXERCISE} {name}", SUITES[2], (module,), (stub,))
    for name, module, stub in zip(PG_FUNCTIONS, PG_MODULES, PG_STUBS, strict=True)
)
MEASURED = ("exercise 5", "exercise 6")  # a measurement, run on the scripted stand-in
# The modules of those rows that run the measurement itself, each in a pytest child of its own
# with a longer deadline (exercise 5's functions on their own run beside exercises 1-4).
MEASUREMENTS = ("test_exercise_5", "test_exercise_6")
LEFT_OUT = (Status.LEFT_OUT, "left out by --no-measured")


def deadline_of(nodeid: str, default: float = TEST_SECONDS) -> float:
    """The deadline of one test, in seconds: the pytest child's and the parent watching it. A
    measurement (``MEASUREMENTS``) runs whole (processes, leases, the stand-in's scripted
    turns) in one test: its tests get longer."""
    module = Path(nodeid.split("::")[0]).stem
    return MEASURED_TEST_SECONDS if module in MEASUREMENTS else default


def module_of(function: str) -> str:
    return "test_" + function.rpartition(".")[2]


def subjects() -> list[Subject]:
    """Every row of the table: the chapter's functions, the rows beyond the book, then the
    exercises."""
    functions = [Subject(f, SUITES[0], (module_of(f),), (f,)) for f in FUNCTIONS]
    return functions + list(BEYOND) + list(EXERCISES)


def kind_of(row: Subject) -> str:
    """``function``, ``beyond`` (a row beyond the book) or ``exercise``: what a row counts for."""
    if row in BEYOND:
        return "beyond"
    return "exercise" if row.label.startswith("exercise") else "function"


def function_of(row: Subject) -> str:
    """The function whose hang fails a row at once: a beyond-the-book row's is its stub's."""
    return (row.stubs[0] if row in BEYOND else row.label).rpartition(".")[2]


def subject(label: str) -> Subject:
    """The row called ``label``, in the table or one of ``PG_ROWS``; ValueError names the rows
    there are."""
    rows = [*subjects(), *PG_ROWS]
    for found in rows:
        if found.label == label:
            return found
    known = ", ".join(s.label for s in rows)
    raise ValueError(f"no row {label!r} in make check: it has {known}")


def row_function(nodeid: str) -> str:
    """The function a test belongs to (what a hang in it blocks): exercise 7's by its module."""
    module = Path(nodeid.split("::")[0]).stem
    if module in PG_MODULES:  # exercise 7: one module per function
        return module.removeprefix("test_pg_")
    return next((function_of(s) for s in subjects() if module in s.modules), module)


def shown(path: Path) -> str:
    """``path`` as a student types it: relative to the kit's root when inside it (not
    resolved, so the venv's ``python`` stays the venv's)."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- the stubs


def stubs_in(path: Path) -> dict[str, str | None]:
    """The functions (``Class.method`` for methods) whose body is still ``raise NotStarted``,
    each with the notebook section its stub names."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    return {name: stub_section(node) for name, node in functions_in(tree) if is_stub_node(node)}


def all_stubs(path: Path) -> dict[str, str | None]:
    """The stubs of a student's files: the chapter file's and ``exercises.py``'s by name, and
    those of the ``ch13_postgres.py`` beside them as ``ch13_postgres.<name>``."""
    pg = stubs_in(path.with_name(PG_FILE))
    pg = {f"{PG_PREFIX}{name}": section for name, section in pg.items()}
    return stubs_in(path) | stubs_in(path.with_name(loader.EXERCISES)) | pg


def not_started(section: str | None) -> str:
    """A NOT STARTED row's message: where to read first."""
    return f"read notebook {section}" if section else "the body is still `raise NotStarted(...)`"


def set_aside(
    path: Path, measured: bool, stubs: dict[str, str | None]
) -> dict[str, tuple[Status, str]]:
    """The rows that run no test, each with its status and message: the measured exercises
    under ``--no-measured``; each row of exercise 7 (the whole, or one of ``PG_ROWS``) that is
    not a stub, without its file or PostgreSQL."""
    aside = {} if measured else dict.fromkeys(MEASURED, LEFT_OUT)
    pg_rows = [
        row.label
        for row in (subject(PG_EXERCISE), *PG_ROWS)
        if not any(stub in stubs for stub in row.stubs)  # else NOT STARTED by its syntax
    ]
    if not pg_rows:
        return aside
    if not path.with_name(PG_FILE).is_file():
        why = (Status.FAILING, f"no {PG_FILE} beside {shown(path)}: exercise 7 lives there")
    elif reason := postgres.missing_for_tests():
        why = (Status.LEFT_OUT, f"left out: it needs PostgreSQL, and {reason}")
    else:
        return aside
    return aside | dict.fromkeys(pg_rows, why)
