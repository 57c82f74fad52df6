"""Exercise 6, give the replacement the records: the recovery measurement with and without them.

One quick run (real model samples) is shared by the tests. The counts are judged by
recomputing them from the receipt's raw samples; the records by reading the shop and the
supplier's ledger they came from, each named by the run: a path to check, never a fact.
"""

from __future__ import annotations

import pytest

from lucyshop.lab.exercises.receipts import check_receipt
from lucyshop.lab.loader import ROOT
from lucyshop.lab.model.backend import GRADED

EXERCISE = "exercise_6_records"
COMMITTED = ROOT / "evidence" / "ch13-exercise6-records-receipt.json"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def result(ran):
    return ran


ORDER = {
    "operation": "op-4b7e",
    "supplier": "dairy",
    "proposal": '{"quantity": 6, "sku": "vanilla-tub", "unit_cents": 450}',
    "status": "UNKNOWN",
}


def test_the_records_message_says_what_the_row_says_and_the_rule(exercises):
    message = exercises.records_message(dict(ORDER))
    for fact in ("op-4b7e", "dairy", "vanilla-tub", "UNKNOWN", "lookup_order"):
        assert fact in message, fact
    other = exercises.records_message(ORDER | {"operation": "op-9999", "status": "ACCEPTED"})
    assert "op-9999" in other and "ACCEPTED" in other and "op-4b7e" not in other


def test_the_receipt_recomputes_from_its_observations(result, leases, answer_receipt):
    assert check_receipt(answer_receipt(result), leases) == []


def test_the_receipt_records_its_provenance(result, answer_receipt):
    receipt = answer_receipt(result)
    record, settings = receipt["provenance"], receipt["settings"]
    assert record["exercise"] == receipt["exercise"] == 6
    assert receipt["settings"]["backend"] == GRADED, "the run used the backend it was given"
    for key in (
        "command",
        "started_utc",
        "python",
        "platform",
        "cpu_count",
        "libraries",
        "loadavg_start",
        "loadavg_end",
    ):
        assert record.get(key) not in (None, "", []), key
    models = receipt["observations"]["models"]
    assert models and list(models) == settings["models"]
    for model in models.values():
        if model["backend"] == "embedded":
            assert len(model["sha256"]) == 64
    assert settings["quick"] is True and settings["max_tokens"] > 0 and "temperature" in settings


def test_the_records_given_are_the_shops_own(result, read, query, ledger, answer_receipt):
    db = read(result["shop"])
    orders = query(db, "SELECT operation, status, amount_cents FROM assistant_orders")
    assert len(orders) == 1 and orders[0]["status"] == "UNKNOWN"
    account = query(db, "SELECT reserved_cents FROM spending_account")[0]
    assert account["reserved_cents"] == orders[0]["amount_cents"], "its money is still reserved"
    assert [row["operation"] for row in ledger(result["ledger_file"])] == [orders[0]["operation"]]
    message = answer_receipt(result)["observations"]["messages"]["records"][-1]["content"]
    assert orders[0]["operation"] in message and "UNKNOWN" in message


def test_every_model_answered_both_transcripts(result, answer_receipt):
    receipt = answer_receipt(result)
    for name, counts in receipt["figures"]["models"].items():
        for arm in ("plain", "records"):
            assert counts[arm]["samples"] == receipt["settings"]["samples"] > 0, (name, arm)


def test_the_committed_receipt_recomputes_from_its_observations(leases, load_receipt):
    assert COMMITTED.is_file(), f"{COMMITTED} is missing: run python solutions/exercises.py 6"
    assert check_receipt(COMMITTED, leases) == []
    assert load_receipt(COMMITTED)["settings"]["quick"] is False
