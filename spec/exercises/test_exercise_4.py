"""Exercise 4, sessions vs the account ceiling: two sessions spend at once; the ceiling holds."""

from __future__ import annotations

import pytest

EXERCISE = "exercise_4_sessions_vs_ceiling"


@pytest.fixture
def result(ran):
    return ran


def test_two_sessions_hold_work_at_the_same_time(result):
    held = result["held_at_once"]
    assert len(held) == 2
    assert len({row["session_id"] for row in held}) == 2
    assert len({row["worker_id"] for row in held}) == 2


def test_a_second_turn_of_a_held_session_waits(result):
    assert result["third_claim"] is None


def test_each_order_fits_but_together_they_exceed_the_ceiling(result, read, query):
    db = read(result["shop"])
    amounts = [
        row["amount_cents"] for row in query(db, "SELECT amount_cents FROM assistant_orders")
    ]
    assert len(amounts) == 2
    assert all(amount <= result["ceiling_cents"] for amount in amounts)
    assert sum(amounts) > result["ceiling_cents"]


def test_only_the_affordable_order_is_reserved(result, read, query):
    db = read(result["shop"])
    orders = query(db, "SELECT id, amount_cents, status FROM assistant_orders ORDER BY id")
    approved = [o for o in orders if o["status"] == "APPROVED"]
    assert sorted(o["status"] for o in orders) == ["APPROVED", "DRAFT"]
    account = query(db, "SELECT reserved_cents, spent_cents FROM spending_account")[0]
    assert account == {"reserved_cents": approved[0]["amount_cents"], "spent_cents": 0}
    assert account["reserved_cents"] <= result["ceiling_cents"]
    approvals = sorted(worker["approval"].split(":")[0] for worker in result["workers"].values())
    assert approvals == ["APPROVED", "PermissionError"]
    refused = next(w for w in result["workers"].values() if w["approval"] != "APPROVED")
    assert refused["order_id"] != approved[0]["id"]
