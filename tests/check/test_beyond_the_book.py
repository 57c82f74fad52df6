"""Rows beyond the book (``subjects.BEYOND``): shown and graded in ``make check``'s table, never
failing a chapter row, the checkpoint or the exit status.

Unit tests of the engine's parts (``table``, ``suites``) on outcomes stated here: a whole
check of the chapter's own code, with this row FAILING and every chapter row PASSING, is
``tests/book/test_book_handin.py``'s.
"""

from __future__ import annotations

from typing import Any

import pytest

from lucyshop.lab.check import suites
from lucyshop.lab.check.results import CheckpointResult
from lucyshop.lab.check.subjects import BEYOND, FUNCTIONS, kind_of, row_function, subjects
from lucyshop.lab.check.table import (
    build_rows,
    checkpoint_lines,
    exit_status,
    summary_line,
    table_lines,
)
from lucyshop.lab.checkpoint.cases import CASES, Case
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import CheckpointStatus, Status

[ROW] = BEYOND  # claim (beyond the book)
MODULE = f"{ROW.directory}/{ROW.modules[0]}.py"
SPEC = "/tmp/hand-in/ch13_leases.py"


def outcome(nodeid: str, passed: bool = True, **more: Any) -> dict[str, Any]:
    """One test's result, as a pytest child writes it back."""
    module = nodeid.split("::")[0].rpartition("/")[2].removesuffix(".py")
    found = {"event": "result", "nodeid": nodeid, "module": module, "not_started": None}
    return found | {"outcome": "passed" if passed else "failed", "message": ""} | more


def every_row_passing() -> dict[str, dict[str, Any]]:
    """One passing test for each row of the table."""
    found = {}
    for row in subjects():
        for module in row.modules:
            nodeid = f"{row.directory}/{module}.py::test_it"
            found[nodeid] = outcome(nodeid)
    return found


def rows_of(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rows = build_rows(results, SPEC, stubs={}, counts=None)
    return {row.label: row for row in rows}


def beyond_failing(results: dict[str, dict[str, Any]], count: int) -> None:
    """``count`` failing tests of the row beyond the book, in place of its passing one."""
    del results[f"{MODULE}::test_it"]
    for n in range(count):
        nodeid = f"{MODULE}::test_refuses[{n}]"
        results[nodeid] = outcome(nodeid, False, message=f"case {n} should raise ValueError")


def test_the_row_is_its_own_kind_after_the_functions_and_names_its_stub():
    labels = [row.label for row in subjects()]
    assert labels.index(ROW.label) == len(FUNCTIONS), "after the chapter's functions"
    assert kind_of(ROW) == "beyond" and "beyond the book" in ROW.label
    assert ROW.stubs == ("claim",)
    assert row_function(f"{MODULE}::test_it") == "claim", "a hang there is claim's"


def test_a_failing_row_beyond_the_book_changes_no_exit_status():
    results = every_row_passing()
    beyond_failing(results, 1)
    rows = list(rows_of(results).values())
    assert [r.status for r in rows if r.kind == "beyond"] == [Status.FAILING]
    assert exit_status(rows, CheckpointStatus.PASSING, False) == 0
    assert exit_status(rows, CheckpointStatus.FAILING, False) == 1, "the checkpoint still counts"
    summary = summary_line(rows, CheckpointStatus.PASSING)
    assert summary.startswith(
        f"{len(FUNCTIONS)}/{len(FUNCTIONS)} functions PASSING · beyond the book: 0/1 PASSING,"
        " 1 FAILING · checkpoint PASSING · "
    ), summary


def test_a_hang_in_a_row_beyond_the_book_fails_that_row_alone():
    """A claim that times out in the row's tests (the book's sorting query on a loaded
    machine) fails that row, not the chapter's claim row, which passed its own tests."""
    results = every_row_passing()
    nodeid = f"{MODULE}::test_it"
    results[nodeid] = suites.stopped_in(nodeid, "timed out after 30 s")
    rows = rows_of(results)
    assert rows[ROW.label].status == Status.FAILING
    assert rows["claim"].status == Status.PASSING, rows["claim"]


def test_a_hang_in_the_chapters_claim_row_fails_the_row_beyond_it_too():
    results = every_row_passing()
    nodeid = "spec/learner/test_claim.py::test_it"
    results[nodeid] = suites.stopped_in(nodeid, "timed out after 30 s")
    rows = rows_of(results)
    assert (rows["claim"].status, rows[ROW.label].status) == (Status.FAILING, Status.FAILING)


def test_the_row_runs_in_a_pytest_child_of_its_own():
    _paths, parts = suites.plan({}, {})
    assert [part for part in parts if MODULE in part] == [[MODULE]], parts
    assert any(f"{ROW.directory}/test_claim.py" in part for part in parts), "the chapter's rows run"


@pytest.mark.parametrize("count", [1, 5])
def test_the_table_lists_its_first_failure_and_reruns_the_rest_in_one_command(count):
    results = every_row_passing()
    beyond_failing(results, count)
    lines = table_lines(list(rows_of(results).values()))
    at = next(n for n, line in enumerate(lines) if line.startswith(f"  {ROW.label} "))
    below = lines[at + 1 : at + 4]
    assert below[0].strip() == "test_refuses[0]: case 0 should raise ValueError", below
    assert below[1].strip().startswith("rerun: ") and "test_refuses[0]" in below[1], below
    if count == 1:
        assert below[2].startswith("  exercise 1 "), "one failure: then the next row"
    else:
        assert below[2].strip().startswith(f"and {count - 1} more failing tests; rerun them all:")
        assert below[2].endswith(f"-m pytest {MODULE} --impl {SPEC} -p pytest_timeout"), below


def test_the_checkpoint_lines_name_the_kits_own_cases_beyond_the_book():
    """make check names each checkpoint case as the checkpoint does: the kit's own cases
    (``in_book`` false) say they are beyond the book, the chapter's do not."""
    judged = [Case(case.number, case.name, True, "confirmed") for case in CASES]
    lines = checkpoint_lines(CheckpointResult(CheckpointStatus.PASSING, judged), "command")
    assert {case.in_book for case in CASES} == {True, False}, "both kinds are named"
    for case in CASES:
        [line] = [line for line in lines if f" {case.number} {case.name}" in line]
        assert ("(beyond the book)" in line) is not case.in_book, line


def test_cases_waiting_on_one_stub_share_one_not_started_line():
    """A checkpoint NOT STARTED prints one line per distinct message, not one per case: six
    cases waiting on claim() are one line naming all six."""
    waiting = "claim() is not started: read notebook 13b § Claim work in one transaction"
    judged = [Case(0, CASES[0].name, True, "confirmed")]
    judged += [Case(case.number, case.name, False, waiting) for case in CASES[1:]]
    lines = checkpoint_lines(CheckpointResult(CheckpointStatus.NOT_STARTED, judged), "command")
    [line] = [line for line in lines if waiting in line]
    assert line.strip().startswith(f"NOT STARTED  {len(CASES) - 1} cases (")
    assert all(CASES[n].title in line for n in range(1, len(CASES)))
    assert sum("PASS" in line for line in lines) == 1, lines


def test_a_stub_claim_sends_the_row_beyond_the_book_to_its_own_section():
    """claim still a stub: the chapter's claim row points to where claim is taught, the row
    beyond it to the section that teaches what it asks beyond the book."""
    chapter = "13b § Claim work in one transaction"
    rows = build_rows(every_row_passing(), SPEC, stubs={"claim": chapter}, counts=None)
    found = {row.label: row for row in rows}
    assert found["claim"].status == found[ROW.label].status == Status.NOT_STARTED
    assert found["claim"].message == f"read notebook {chapter}"
    assert found[ROW.label].message == "read notebook 13b § Hostile input to claim"
    assert ROW.section is not None and ROW.section.removeprefix("13b § ") in (
        ROOT / "notebooks" / "13b_recover_after_a_crash.ipynb"
    ).read_text(encoding="utf-8"), "the section it names exists"
