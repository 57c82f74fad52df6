"""Exercise 6, give the replacement the records: the recovery measurement with and without them.

One quick run is shared by the tests, measured by the trusted side itself (``observed``): the
answers' chapter functions and ``records_message`` are called in the sandbox, while the
supplier, its ledger (kept out of the sandbox's reach), the model's samples and the receipt
are this side's own. A receipt, shop or ledger the answers' own run writes earns nothing. The
counts are weighed by recomputing them from the receipt's raw samples; the records by reading
the shop and the supplier's ledger they came from.
"""

from __future__ import annotations

import pytest

from lucyshop.lab.exercises.exercise_receipts import receipt_problems
from lucyshop.lab.loader import ROOT
from lucyshop.supplier import ledger_orders

EXERCISE = "exercise_6_records"
COMMITTED = ROOT / "evidence" / "ch13-exercise6-records-receipt.json"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def result(observed):
    return observed


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


def test_the_receipt_recomputes_from_its_observations(result, leases):
    assert receipt_problems(result["receipt"], leases) == []


def test_the_receipt_records_its_provenance(result, provenance):
    receipt, settings = provenance(result["receipt"], 6)
    models = receipt["observations"]["models"]
    assert models and list(models) == settings["models"]
    for model in models.values():
        if model["backend"] == "embedded":
            assert len(model["sha256"]) == 64
    assert settings["quick"] is True and settings["max_tokens"] > 0 and "temperature" in settings


def test_the_records_given_are_the_shops_own(result, read, query, load_receipt):
    db = read(result["shop"])
    orders = query(db, "SELECT operation, status, amount_cents FROM assistant_orders")
    assert len(orders) == 1 and orders[0]["status"] == "UNKNOWN"
    account = query(db, "SELECT reserved_cents FROM spending_account")[0]
    assert account["reserved_cents"] == orders[0]["amount_cents"], "its money is still reserved"
    assert [row["operation"] for row in ledger_orders(result["ledger_file"])] == [
        orders[0]["operation"]
    ]
    message = load_receipt(result["receipt"])["observations"]["messages"]["records"][-1]["content"]
    assert orders[0]["operation"] in message and "UNKNOWN" in message


def test_every_model_answered_both_transcripts(result, load_receipt):
    receipt = load_receipt(result["receipt"])
    for name, counts in receipt["figures"]["models"].items():
        for arm in ("plain", "records"):
            assert counts[arm]["samples"] == receipt["settings"]["samples"] > 0, (name, arm)


def test_the_committed_receipt_recomputes_from_its_observations(leases, load_receipt):
    assert COMMITTED.is_file(), f"{COMMITTED} is missing: run python solutions/exercises.py 6"
    assert receipt_problems(COMMITTED, leases) == []
    assert load_receipt(COMMITTED)["settings"]["quick"] is False
