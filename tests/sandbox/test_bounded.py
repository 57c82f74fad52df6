"""A file that hangs, exits or dies is bounded and named; every other row is still graded."""

from __future__ import annotations

import re

import pytest
from conftest import CASE_SECONDS, TEST_SECONDS
from sandbox_files import rows

from lucyshop.lab.check.plugin.collect import BACKSTOP
from lucyshop.lab.check.subjects import LEFT_OUT

pytestmark = pytest.mark.slow


def test_a_hanging_function_fails_its_own_row_with_the_deadline(broken_run):
    status, data, output = broken_run
    assert status == 1, output[-3000:]
    claim = rows(data)["claim"]
    assert claim["status"] == "FAILING", claim
    assert claim["message"] == f"timed out after {TEST_SECONDS} s in claim()", claim["message"]
    messages = {failure["message"] for failure in claim["failures"]}
    assert all(  # a multi-process test of claim times out waiting for its hung children
        m.startswith(f"timed out after {TEST_SECONDS} s")
        or m == f"timed out after {TEST_SECONDS + BACKSTOP:g} s"
        or m == "not run again: claim() hung or ended the process in an earlier test"
        for m in messages
    ), messages
    row = rf"^  claim +FAILING +0/\d+   timed out after {TEST_SECONDS} s in claim\(\)$"
    assert re.search(row, output, re.MULTILINE), output[-3000:]


def test_a_hung_function_costs_one_deadline_also_after_the_process_is_restarted(broken_run):
    """claim() hangs first (test_assert_current), then fenced() ends the process
    (test_fenced) and the suite is rerun: in the rerun claim() fails at once (test_finish)."""
    _status, data, _output = broken_run
    finish = rows(data)["finish"]
    assert finish["status"] == "FAILING" and finish["failures"], finish
    assert {f["message"] for f in finish["failures"]} == {
        "needs claim() first: it hung or ended the process in an earlier test"
    }, finish["failures"]


def test_system_exit_and_os_exit_fail_the_function_that_raised_them(broken_run):
    _status, data, _output = broken_run
    table = rows(data)
    assert table["percentile"]["status"] == "FAILING", table["percentile"]
    assert "SystemExit" in table["percentile"]["failures"][0]["message"]
    assert table["fenced"]["status"] == "FAILING", table["fenced"]
    assert table["fenced"]["message"].startswith(
        "the process running fenced() exited with status 0"
    ), table["fenced"]


def test_every_other_row_is_still_graded(broken_run):
    _status, data, _output = broken_run
    table = rows(data)
    independent = ["false_expiry_share", "shortest_lease", "detection_delay", "open_worker_shop"]
    assert {name: table[name]["status"] for name in independent} == dict.fromkeys(
        independent, "PASSING"
    )
    observe = table["observe"]
    assert observe["status"] == "FAILING"
    assert all("claim() first" in f["message"] for f in observe["failures"]), observe["failures"]


def test_the_checkpoint_names_the_case_that_exited_and_the_one_that_hung(broken_run):
    _status, data, _output = broken_run
    checkpoint = data["checkpoint"]
    assert checkpoint["status"] == "FAILING"
    cases = {case["case"]: case for case in checkpoint["cases"]}
    assert not cases[0]["passed"] and "SystemExit" in cases[0]["message"], cases[0]
    hung = cases[1]
    assert not hung["passed"] and f"timed out after {CASE_SECONDS} s" in hung["message"], hung
    assert not any(case["passed"] for case in checkpoint["cases"])


def test_the_json_keeps_its_contract(broken_run):
    status, data, output = broken_run
    assert data["schema"] == "ch13-check/2" and data["exit"] == status
    assert data["error"] is None and data["summary"] == output.strip().splitlines()[-1]
    assert re.match(
        r"\d+/16 functions PASSING, \d+ FAILING · (beyond the book: [^·]+ · )?checkpoint FAILING"
        r" · exercises: ",
        data["summary"],
    ), data["summary"]
    assert {row["kind"] for row in data["rows"]} <= {"function", "beyond", "exercise"}
    for row in data["rows"]:
        assert row["status"] in ("PASSING", "FAILING", "NOT STARTED", LEFT_OUT[0]), row
        for failure in row["failures"]:
            assert set(failure) == {"test", "message", "rerun"} and "pytest" in failure["rerun"]
    assert data["feedback"].rstrip().endswith(data["summary"])
