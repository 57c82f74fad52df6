"""13c's cell for the learner's own measured receipt prints the lab's one result line
(``statuses.result_line``): PASSING, FAILING once for each problem, NOT STARTED while there is none.
The receipt's reading is the exercise room's own; here it is stood in for, to pin the lines."""

from __future__ import annotations

import json

import pytest

from lucyshop.lab.exercises import exercise_receipts
from lucyshop.lab.lesson import show


@pytest.fixture
def receipt(tmp_path, monkeypatch):
    """A receipt file, whose problems are whatever the test sets in ``problems``."""
    problems: list[str] = []
    monkeypatch.setattr(exercise_receipts, "receipt_problems", lambda _path, _leases: problems)
    monkeypatch.setattr(exercise_receipts, "headline", lambda _receipt: ["its headline"])
    path = tmp_path / "exercise5-receipt.json"
    path.write_text(json.dumps({"exercise": 5}), encoding="utf-8")
    return path, problems


def test_a_receipt_that_stands_prints_one_pass_line(receipt, capsys):
    path, _ = receipt
    show.receipt_check(path, leases=None)
    assert capsys.readouterr().out.splitlines() == [
        "PASSING  your receipt (exercise5-receipt.json): every figure recomputed",
        "its headline",
    ]


def test_a_receipt_that_does_not_stand_prints_a_fail_line_for_each_problem(receipt, capsys):
    path, problems = receipt
    problems += ["p50 is 2.4, recomputed 2.5", "the run was cut short"]
    show.receipt_check(path, leases=None)
    assert capsys.readouterr().out.splitlines() == [
        "FAILING  your receipt (exercise5-receipt.json): p50 is 2.4, recomputed 2.5",
        "FAILING  your receipt (exercise5-receipt.json): the run was cut short",
        "its headline",
    ]


def test_no_receipt_yet_is_not_started(tmp_path, capsys):
    show.receipt_check(tmp_path / "exercise6-receipt.json", leases=None)
    assert capsys.readouterr().out == (
        "NOT STARTED  your receipt: no exercise6-receipt.json yet (run the optional cell above)\n"
    )
