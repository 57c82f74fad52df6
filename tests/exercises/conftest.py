"""The exercise checks: each answer of the exercise book (notebook 13c), run and then judged.

    .venv/bin/python -m pytest tests/exercises --impl learner     # your answers (the default)
    .venv/bin/python -m pytest tests/exercises --impl solutions   # the worked answers
    .venv/bin/python -m pytest tests/exercises --impl PATH        # anyone's: a directory,
                                                                  # or a file in it

``--impl`` (default ``$LEASES_IMPL``, else ``learner``) chooses *both* files: the chapter
file ``ch13_leases.py`` and the ``exercises.py`` beside it. PATH may be either file or their
directory. ``--block-reference`` makes the rest of ``solutions/`` unreadable in this process.

One module per exercise: ``test_exercise_N.py`` checks exercise N, and that is how the
``make check`` table groups the results. Each test calls the answer (the module's
``EXERCISE``), then judges what it returned and what the databases hold, read back from the
files it names. While an exercise is still a stub, its tests stop at its own ``NotStarted``.
No test compares a measured duration with a threshold: the measured exercises (5, 6) are
judged by their receipts (every figure recomputed from the raw observations) and by the rows
their runs left behind.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import sqlite3
import sys
import textwrap
from contextlib import closing
from pathlib import Path
from types import ModuleType

import pytest
from impls import EXERCISES, IMPL_PATH
from model_lock import one_model_at_a_time

from lucyshop.lab.loader import ENV, ROOT, load_impl
from lucyshop.lab.stubs import is_stub_node

MODULE = "ch13_exercises"
EVIDENCE = ROOT / "evidence"


def pytest_report_header(config: pytest.Config) -> str:
    chapter = config.stash[IMPL_PATH]
    return f"chapter 13 exercises: {chapter.parent / EXERCISES} (chapter file {chapter})"


# ---------------------------------------------------------------- the answers under test


@pytest.fixture(scope="session")
def chapter_file(pytestconfig: pytest.Config) -> Path:
    return pytestconfig.stash[IMPL_PATH]


@pytest.fixture(scope="session")
def exercises_file(chapter_file: Path) -> Path:
    return chapter_file.parent / EXERCISES


def load_exercises(exercises_file: Path, chapter_file: Path) -> ModuleType:
    """The exercises file as a fresh module; ``$LEASES_IMPL`` must already name ``chapter_file``."""
    if not exercises_file.is_file():  # a chapter file graded on its own: every exercise row says so
        pytest.fail(
            f"no {EXERCISES} beside {chapter_file}: the exercises live next to the chapter file"
        )
    spec = importlib.util.spec_from_file_location(MODULE, exercises_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def exercises(
    exercises_file: Path, chapter_file: Path, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    """The answers, loaded fresh for this test, using the chapter file chosen with ``--impl``."""
    monkeypatch.setenv(ENV, str(chapter_file))
    return load_exercises(exercises_file, chapter_file)


@pytest.fixture
def leases(chapter_file: Path) -> ModuleType:
    """The chapter functions of the same implementation (what a receipt is recomputed with)."""
    return load_impl(chapter_file)


def is_stub(function) -> bool:
    """True while the function's body is only its docstring and ``raise NotStarted(...)``."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    except (OSError, TypeError, SyntaxError):
        return False
    return is_stub_node(node)


def stop_if_stub(module: ModuleType, name: str) -> None:
    """Raise the exercise's own ``NotStarted`` while it is still a stub (before anything costly)."""
    function = getattr(module, name, None)
    if function is None:
        pytest.fail(f"{module.__file__} has no {name}()", pytrace=False)
    if is_stub(function):
        required = [
            p for p in inspect.signature(function).parameters.values() if p.default is p.empty
        ]
        function(
            *[None] * sum(p.kind is not p.KEYWORD_ONLY for p in required),
            **{p.name: None for p in required if p.kind is p.KEYWORD_ONLY},
        )


@pytest.fixture(autouse=True)
def _stub_first(request: pytest.FixtureRequest) -> None:
    """A test of an exercise that is still a stub fails with that exercise's ``NotStarted``."""
    name = getattr(request.module, "EXERCISE", None)
    if name is not None:
        exercises_file, chapter_file = (
            request.getfixturevalue(f) for f in ("exercises_file", "chapter_file")
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ENV, str(chapter_file))
            stop_if_stub(load_exercises(exercises_file, chapter_file), name)


@pytest.fixture(scope="module")
def ran(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> dict:
    """One run of the module's exercise (``EXERCISE``), shared by the module's tests.

    Exercises 1-4 get a fresh directory. The measured ones (5, 6) run quick, with a receipt
    path and a work directory they keep, so that the tests can read back the shops they used.
    """
    chapter_file = pytestconfig.stash[IMPL_PATH]
    name = request.module.EXERCISE
    directory = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV, str(chapter_file))
        module = load_exercises(chapter_file.parent / EXERCISES, chapter_file)
        stop_if_stub(module, name)
        answer = getattr(module, name)
        if next(iter(inspect.signature(answer).parameters)) == "out":  # measured: model turns
            with one_model_at_a_time(request):
                return answer(directory / "receipt.json", quick=True, workdir=directory / "work")
        return answer(directory / "answer")


# ---------------------------------------------------------------- reading back


@pytest.fixture
def read():
    """``read(path)``: a connection to a database file an answer named, closed after the test."""
    opened: list[sqlite3.Connection] = []

    def open_(path: str | os.PathLike) -> sqlite3.Connection:
        path = Path(path)
        assert path.is_file(), f"the answer named {path}, and there is no such file"
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        opened.append(db)
        return db

    yield open_
    for db in opened:
        db.close()


def table(db: sqlite3.Connection, sql: str, *args) -> list[dict]:
    return [dict(row) for row in db.execute(sql, args)]


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
