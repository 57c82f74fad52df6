"""The exercise tests: each answer of the exercise book (notebook 13c), run and then weighed.

    .venv/bin/python -m pytest spec/exercises --impl learner     # your answers (the default)
    .venv/bin/python -m pytest spec/exercises --impl solutions   # the worked answers
    .venv/bin/python -m pytest spec/exercises --impl PATH        # anyone's: a directory,
                                                                  # or a file in it

``--impl`` (default ``$LEASES_IMPL``, else ``learner``) chooses *both* files: the chapter
file ``ch13_leases.py`` and the ``exercises.py`` beside it. PATH may be either file or their
directory. Both run in the sandboxed worker (``lucyshop.lab.sandbox``), never in this process.

One module per exercise: ``test_exercise_N.py`` tests exercise N, and that is how the
``make check`` table groups the results. Each test calls the answer (the module's
``EXERCISE``), then weighs what it returned and what the databases hold, read back from the
files it names. While an exercise is still a stub, its tests stop at its own ``NotStarted``.
No test compares a measured duration with a threshold: the measured exercises (5, 6) are
weighed by their receipts (every figure recomputed from the raw observations) and by what their
runs left behind. Both runs are the trusted side's own (``renewed``, ``observed``): the
answers' functions are called in the sandbox, and the processes, clock and receipt are this
side's. A receipt or shop the answers' own run writes earns nothing, and neither do the rows
and ``report=`` entries of exercise 5's renewer on their own: its leases are watched from here.
A path an answer names (exercise 2's ledger) is data to vet: ``read`` and ``ledger`` read it
through ``lucyshop.lab.check.named``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from lucyshop.lab.check import named
from lucyshop.lab.check.plugin.chapter import DEFAULT_BUDGET, IMPL_PATH, budget, sandbox_for
from lucyshop.lab.check.plugin.collect import deadline_of
from lucyshop.lab.exercises import runs
from lucyshop.lab.given.stubs import placeholders, stub_nodes
from lucyshop.lab.loader import EXERCISES, ROOT
from lucyshop.lab.model.backend import GRADED
from lucyshop.lab.sandbox import Remote, sandboxed_shop
from lucyshop.supplier import ledger_orders

PROVENANCE_KEYS = (
    "command",
    "started_utc",
    "python",
    "platform",
    "cpu_count",
    "libraries",
    "loadavg_start",
    "loadavg_end",
)
START_SECONDS = 60.0  # loading the answers to let a stub raise its own NotStarted
EVIDENCE = ROOT / "evidence"


def pytest_report_header(config: pytest.Config) -> str:
    chapter = config.stash[IMPL_PATH]
    return f"chapter 13 exercises: {chapter.parent / EXERCISES} (chapter file {chapter})"


# ---------------------------------------------------------------- the answers under test


@pytest.fixture(scope="session")
def exercises_file(chapter_file: Path) -> Path:
    return chapter_file.parent / EXERCISES


def load_exercises(request: pytest.FixtureRequest, seconds: float) -> Remote:
    """The exercises file freshly loaded in the sandbox (its chapter file beside it)."""
    chapter_file = request.config.stash[IMPL_PATH]
    if not (chapter_file.parent / EXERCISES).is_file():  # a chapter file graded on its own
        pytest.fail(
            f"no {EXERCISES} beside {chapter_file}: the exercises live next to the chapter file"
        )
    return sandbox_for(request).load(EXERCISES, seconds=seconds)


@pytest.fixture
def exercises(request: pytest.FixtureRequest) -> Remote:
    """The answers, loaded fresh in the sandbox for this test; ``exercises.chapter()`` is the
    chapter file chosen with ``--impl``, there too."""
    return load_exercises(request, budget(request))


@pytest.fixture
def leases(request: pytest.FixtureRequest) -> Remote:
    """The chapter functions of the same implementation (what a receipt is recomputed with)."""
    return sandbox_for(request).load("ch13_leases.py", seconds=budget(request))


def stop_if_stub(request: pytest.FixtureRequest, exercises_file: Path, name: str) -> None:
    """Raise the exercise's own ``NotStarted`` while it is still a stub (before anything costly),
    read from the file's syntax tree and raised by the stub itself, in the sandbox."""
    node = stub_nodes(exercises_file).get(name)
    if node is None:
        return
    args, kwargs = placeholders(node)
    getattr(load_exercises(request, START_SECONDS), name)(*args, **kwargs)


@pytest.fixture(autouse=True)
def _stub_first(request: pytest.FixtureRequest) -> None:
    """A test of an exercise that is still a stub fails with that exercise's ``NotStarted``."""
    name = getattr(request.module, "EXERCISE", None)
    if name is not None:
        stop_if_stub(request, request.getfixturevalue("exercises_file"), name)


def module_budget(request: pytest.FixtureRequest) -> float:
    """What a module-scoped run may take in sandbox calls: the module's test deadline."""
    default = request.config.getoption("--deadline", default=None)  # make check's
    default = float(default or request.config.getini("timeout") or DEFAULT_BUDGET)
    return deadline_of(request.node.nodeid, default)


@pytest.fixture(scope="module")
def ran(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run of the module's exercise (``EXERCISE``, one of 1-4), shared by the module's
    tests, in the sandbox, in a fresh directory; what it returns comes back by value. The
    measured ones (5, 6) are run by this side instead: ``renewed`` and ``observed``."""
    chapter_file = request.config.stash[IMPL_PATH]
    name = request.module.EXERCISE
    stop_if_stub(request, chapter_file.parent / EXERCISES, name)
    directory = tmp_path_factory.mktemp(name)
    sandbox_for(request).share(directory)
    return getattr(load_exercises(request, module_budget(request)), name)(directory / "answer")


@contextlib.contextmanager
def trusted_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[tuple[Remote, Path, Path]]:
    """What the trusted side's run of a measured exercise needs: the answers' chapter in the
    sandbox, a directory ``name`` shared with the sandbox, and one of ours that no sandbox is
    shown (removed after the module). The exercise's own stub stops it first."""
    chapter_file = request.config.stash[IMPL_PATH]
    stop_if_stub(request, chapter_file.parent / EXERCISES, request.module.EXERCISE)
    box = sandbox_for(request)
    leases = box.load("ch13_leases.py", seconds=module_budget(request))
    scratch = tmp_path_factory.mktemp(name)
    box.share(scratch)
    with tempfile.TemporaryDirectory(prefix="trusted-") as kept:
        yield leases, scratch, Path(kept)


def shop_opener(leases: Remote) -> Callable[[Path], tuple[sqlite3.Connection, Remote]]:
    """How a trusted run opens a shop in a directory it made in the shared one: the directory
    handed to the sandbox (its own uid, in user mode), then the answers' ``open_worker_shop``
    there, paired with a connection of ours."""

    def open_shop(path: Path) -> tuple[sqlite3.Connection, Remote]:
        leases._sandbox.share(path.parent)
        return sandboxed_shop(leases, path)

    return open_shop


@pytest.fixture(scope="module")
def renewed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Exercise 5 measured by the trusted side itself, quick, on the scripted model: the
    Part A experiment's worker processes, started here, each calling the answers' chapter and
    ``keep_renewing`` (with it ``renew``) in sandboxes of its own, shown the shops alone; the
    turns, kills and takeovers timed and recorded by those workers and this process, where no
    sandbox can write; every shop's leases watched from this process while its phase runs
    (``lucyshop.lab.exercises.watch``); the figures and the receipt made and written here.
    ``exercise_5_renewal`` is never called: a receipt or shop its own run writes earns nothing.

    The same measurement as ``exercise_5_renewal`` (``runs.measure_renewal``), with the
    sandbox's pieces. Yields what ``measure_renewal`` returns (the receipt in a directory of
    ours, the shops in the sandbox's scratch), kept while the module runs.
    """
    answers = request.config.stash[IMPL_PATH].parent / EXERCISES
    with trusted_run(request, tmp_path_factory, "renewed") as (leases, shops, kept):
        yield runs.measure_renewal(
            kept / "receipt.json",
            answers=answers,
            quick=True,
            backend=GRADED,
            workdir=kept / "work",
            leases=leases,
            shops=shops,
            open_shop=shop_opener(leases),
        )


@pytest.fixture(scope="module")
def observed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Exercise 6 measured by the trusted side itself, quick, on the scripted model: the
    records made with the answers' chapter functions in the sandbox, against a supplier of
    ours whose ledger is kept out of the sandbox's reach; the answers' ``records_message``
    called in the sandbox for the message (a string, or the test fails); the samples, the
    figures and the receipt made and written here. A receipt, shop or ledger the answers'
    own run writes earns nothing: none of them is read.

    The same measurement as ``exercise_6_records`` (``runs.measure_records``), with the
    sandbox's pieces. Yields what ``measure_records`` returns (the receipt and the ledger in
    a directory of ours, the shop in the sandbox's scratch), kept while the module runs.
    """
    chapter_file = request.config.stash[IMPL_PATH]
    with trusted_run(request, tmp_path_factory, "observed") as (leases, scratch, kept):
        answers = load_exercises(request, module_budget(request))

        def message(order: dict) -> str:
            text = answers.records_message(order)
            if not isinstance(text, str):
                raise AssertionError(f"records_message() returned {type(text).__name__}, not text")
            return text

        yield runs.measure_records(
            kept / "receipt.json",
            answers=chapter_file.parent / EXERCISES,
            message=message,
            quick=True,
            backend=GRADED,
            workdir=scratch,
            ollama=False,
            leases=leases,
            kept=kept,
            open_shop=shop_opener(leases),
        )


# ---------------------------------------------------------------- reading back


def answer_name(request: pytest.FixtureRequest) -> str:
    """The function whose answer a test reads: what a refused path names."""
    return getattr(request.module, "EXERCISE", "the answer")


@pytest.fixture
def private() -> Iterator[Path]:
    """A directory of the trusted side's own (never shared with the sandbox, unlike
    ``tmp_path``), for the copies of what an answer named; removed after the test."""
    with tempfile.TemporaryDirectory(prefix="trusted-") as directory:
        yield Path(directory)


@pytest.fixture
def read(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, private):
    """``read(path)``: our own connection to a copy of a database file an answer named, made
    by ``lucyshop.lab.check.named`` (a regular file of the session's directory, read without
    following a link or blocking on a FIFO; anything else is refused, naming the answer),
    closed after the test."""
    scratch = tmp_path_factory.getbasetemp()
    opened: list[sqlite3.Connection] = []

    def open_(path: str | os.PathLike, what: str = "shop") -> sqlite3.Connection:
        copy = named.copy_named(path, [scratch], answer_name(request), what, private)
        db = sqlite3.connect(copy)
        db.row_factory = sqlite3.Row
        opened.append(db)
        return db

    yield open_
    for db in opened:
        db.close()


@pytest.fixture
def ledger(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, private):
    """``ledger(path)``: the operations of the supplier ledger an answer named, read from a
    copy made as ``read`` makes one."""
    scratch = tmp_path_factory.getbasetemp()

    def operations(path: str | os.PathLike) -> list[dict]:
        where = named.copy_named(path, [scratch], answer_name(request), "ledger_file", private)
        return ledger_orders(where)

    return operations


def table(db: sqlite3.Connection | Remote, sql: str, *args) -> list[dict]:
    """Rows read on our own connection; a connection of the worker's is first paired with one
    of ours to the file it has open (``mirrored``)."""
    return [dict(row) for row in mirrored(db).execute(sql, args)]


def mirrored(db: sqlite3.Connection | Remote) -> sqlite3.Connection:
    if not isinstance(db, Remote):
        return db
    box = db._sandbox
    path = box.kit("lucyshop.lab.sandbox.inside.shop_probes").database_file(db)
    return box.mirror(db, Path(path))


@pytest.fixture
def query():
    """``query(db, sql, *args) -> [dict]``: rows read back, as dicts."""
    return table


def receipt_of(path: str | os.PathLike) -> dict:
    with closing(open(path, encoding="utf-8")) as handle:
        return json.load(handle)


@pytest.fixture
def load_receipt():
    return receipt_of


@pytest.fixture
def provenance():
    """``provenance(path, exercise) -> (receipt, settings)``: a measured run's receipt, once it
    names its exercise, the backend it was given and where, when and on what it ran."""

    def check(path: str | os.PathLike, exercise: int) -> tuple[dict, dict]:
        receipt = receipt_of(path)
        record, settings = receipt["provenance"], receipt["settings"]
        assert record["exercise"] == receipt["exercise"] == exercise
        assert settings["backend"] == GRADED, "the run used the backend it was given"
        for key in PROVENANCE_KEYS:
            assert record.get(key) not in (None, "", []), key
        return receipt, settings

    return check
