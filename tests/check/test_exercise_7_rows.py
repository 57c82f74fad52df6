"""Exercise 7 one function at a time (``exercise 7 claim``, ``subjects.PG_ROWS``): 13d's
``check("claim")`` is ``check.run(path, only=row)``, the one engine, like every other notebook
check. Its row comes from that function's own test module; it is NOT STARTED by the stub's
syntax, and set aside, like the whole exercise's row, without the file or PostgreSQL."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from lucyshop.lab import check
from lucyshop.lab.check import subjects, suites
from lucyshop.lab.check.subjects import PG_EXERCISE, PG_ROWS, set_aside, subject
from lucyshop.lab.lesson.inline import pg_checker, wrap
from lucyshop.lab.loader import PG_FILE
from lucyshop.lab.services import postgres
from lucyshop.lab.statuses import Status

pytestmark = pytest.mark.timeout(900)  # each run of a row starts a PostgreSQL server

ROOT = Path(__file__).resolve().parents[2]
STUBS = ROOT / "learner" / "ch13_leases.py"
SOLUTIONS = ROOT / "solutions" / "ch13_leases.py"


def needs_postgres() -> None:
    if reason := postgres.missing_for_tests():
        pytest.skip(f"exercise 7's tests need PostgreSQL: {reason}")


def with_a_function_that_does_nothing(directory: Path, name: str) -> Path:
    """A copy of the reference (the chapter file and ``ch13_postgres.py``) whose exercise-7
    ``name`` returns at once; the chapter file's path."""
    for file in ("ch13_leases.py", PG_FILE):
        shutil.copy(ROOT / "solutions" / file, directory / file)
    target = directory / PG_FILE
    source = target.read_text(encoding="utf-8")
    found = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == name
    )
    lines = source.splitlines(keepends=True)
    body = found.body[1].lineno - 1  # after the docstring
    target.write_text("".join([*lines[:body], "    return None\n", *lines[found.end_lineno :]]))
    return directory / "ch13_leases.py"


def test_each_function_of_exercise_7_has_a_row_of_its_own_outside_the_table():
    assert [row.label for row in PG_ROWS] == [f"{PG_EXERCISE} {f}" for f in subjects.PG_FUNCTIONS]
    assert [row.modules for row in PG_ROWS] == [(m,) for m in subjects.PG_MODULES]
    assert [row.stubs for row in PG_ROWS] == [(s,) for s in subjects.PG_STUBS]
    assert not {row.label for row in PG_ROWS} & {row.label for row in subjects.subjects()}
    assert subject("exercise 7 observe").modules == ("test_pg_observe",)
    with pytest.raises(ValueError, match="no row 'exercise 7 renew'"):
        subject("exercise 7 renew")


def test_a_stubbed_function_is_not_started_without_running_a_test(monkeypatch):
    def no_tests(*_args, **_kwargs):
        raise AssertionError("a stub's row ran its tests")

    monkeypatch.setattr(suites, "run_suites", no_tests)
    result = check.run(str(STUBS), only="exercise 7 claim", echo=False)
    assert [row.status for row in result.rows] == [Status.NOT_STARTED]
    shown = "\n".join(result.feedback)
    assert shown.startswith("exercise 7 claim: NOT STARTED\n  read notebook 13d § "), shown
    assert str(pg_checker(STUBS)("claim")) == wrap(shown)  # 13d's check("claim"): the same


def test_a_function_row_is_set_aside_alone_while_another_function_is_a_stub(tmp_path, monkeypatch):
    """Without PostgreSQL, a written function's row is LEFT OUT; the stub's row, and the whole
    exercise's, stay NOT STARTED by their syntax."""
    chapter = tmp_path / "ch13_leases.py"
    (tmp_path / PG_FILE).write_text("", encoding="utf-8")
    monkeypatch.setattr(postgres, "missing_for_tests", lambda: "no server here")
    aside = set_aside(chapter, True, {"ch13_postgres.observe": "13d § Observe"})
    left_out = (Status.LEFT_OUT, "left out: it needs PostgreSQL, and no server here")
    assert aside == dict.fromkeys(
        ["exercise 7 claim", "exercise 7 assert_current", "exercise 7 finish"], left_out
    )
    (tmp_path / PG_FILE).unlink()
    missing = set_aside(chapter, True, {})
    assert set(missing) == {PG_EXERCISE, *(row.label for row in PG_ROWS)}
    assert {status for status, _ in missing.values()} == {Status.FAILING}


def test_the_reference_passes_a_function_row_on_that_functions_tests_alone():
    needs_postgres()
    result = check.run(str(SOLUTIONS), only="exercise 7 claim", echo=False)
    [row] = result.rows
    assert (row.status, row.label) == (Status.PASSING, "exercise 7 claim"), result.feedback
    assert row.passed == row.total > 0


def test_a_function_that_does_nothing_fails_its_row_naming_each_test(tmp_path):
    """13d's check("observe") on a copy of the reference whose observe() returns at once:
    FAILING, each failing test of test_pg_observe.py on its own line, with the command that
    reruns it."""
    needs_postgres()
    chapter = with_a_function_that_does_nothing(tmp_path, "observe")
    result = check.run(str(chapter), only="exercise 7 observe", echo=False)
    [row] = result.rows
    assert row.status == Status.FAILING and row.failures, result.feedback
    assert all(f.test.startswith("spec/postgres/test_pg_observe.py::") for f in row.failures)
    assert all(f" --impl {chapter}" in f.rerun for f in row.failures)
    shown = wrap("\n".join(result.feedback)).splitlines()  # as pg_checker prints it
    counted = re.match(r"exercise 7 observe: FAILING \((\d+)/(\d+) tests\)", shown[0])
    assert counted and int(counted[1]) < int(counted[2]), shown
    assert any(  # the line may go on with the failure's first words
        line.startswith("  test_a_superseded_writer_is_refused_and_writes_nothing")
        for line in shown
    ), shown
    rerun = "    rerun: PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 .venv/bin/python -m pytest"
    assert [line for line in shown if line.startswith(rerun)], shown
