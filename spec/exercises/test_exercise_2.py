"""Exercise 2, cancel while a result is delayed: a held turn,
then an order the supplier accepted."""

from __future__ import annotations

import pytest

EXERCISE = "exercise_2_cancel_while_delayed"


@pytest.fixture
def result(ran):
    return ran


def test_a_cancelled_turns_late_completion_is_refused(result, read, query):
    part = result["delayed_turn"]
    assert part["worker"]["completion"].startswith("PermissionError")
    db = read(part["shop"])
    lease = query(
        db, "SELECT generation FROM assignment_leases WHERE work_id = ?", part["work_id"]
    )[0]
    outcomes = query(
        db, "SELECT generation, status FROM outcomes WHERE work_id = ?", part["work_id"]
    )
    assert outcomes == [{"generation": lease["generation"], "status": "CANCELED"}]
    transcript = query(db, "SELECT generation FROM transcript WHERE work_id = ?", part["work_id"])
    assert transcript and all(row["generation"] < lease["generation"] for row in transcript), (
        "the worker wrote before the cancel and nothing after it"
    )


def test_an_accepted_order_cannot_be_sent_again_after_the_cancel(result, read, query, ledger):
    part = result["accepted_order"]
    assert part["worker"]["send_again"].startswith("PermissionError")
    assert part["worker"]["completion"].startswith("PermissionError")
    assert [row["operation"] for row in ledger(part["ledger_file"])] == [part["operation"]], (
        "the supplier holds one order"
    )
    db = read(part["shop"])
    assert query(db, "SELECT status FROM outcomes WHERE work_id = ?", part["work_id"]) == [
        {"status": "CANCELED"}
    ]


def test_the_uncertain_reservation_is_kept_until_its_outcome_is_known(result):
    part = result["accepted_order"]
    for moment in ("after_cancel", "after_unreachable"):
        seen = part[moment]
        assert seen["order"] == "UNKNOWN", moment
        assert seen["account"]["reserved_cents"] == part["amount_cents"], moment
        assert seen["account"]["spent_cents"] == 0, moment


def test_the_receipt_is_discovered_by_lookup(result, read, query, ledger):
    part = result["accepted_order"]
    assert [(row["operation"], row["after"]) for row in part["reconcile"]] == [
        (part["operation"], "ACCEPTED")
    ]
    db = read(part["shop"])
    order = query(
        db, "SELECT status, receipt FROM assistant_orders WHERE operation = ?", part["operation"]
    )
    assert order[0]["status"] == "ACCEPTED" and part["operation"] in order[0]["receipt"]
    account = query(db, "SELECT reserved_cents, spent_cents FROM spending_account")[0]
    assert account == {"reserved_cents": 0, "spent_cents": part["amount_cents"]}
    assert len(ledger(part["ledger_file"])) == 1, "the lookup ordered nothing"
