"""approval (chapter 11): policy, propose, approve, revoke, record_receipt and execute.

Every refusal is confirmed by reading the orders table and the account back: a refused call
must leave both exactly as they were, and must not have reached the supplier.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import replace

import pytest
from shop_fixtures import VANILLA, VANILLA_CENTS, dead_endpoint

from lucyshop.approval import (
    SpendingPolicy,
    account,
    approve,
    execute,
    get_order,
    propose,
    record_receipt,
    revoke,
)
from lucyshop.lab.given.orders import OPERATOR  # the conftest policy's only operator
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.proposal import amount_cents, digest, operation_id
from lucyshop.supplier import SupplierClient, ledger_orders

SUPPLIER = "dairy"  # the fake's identity, and supplier_process's default
LIMIT = 100_000  # the account's own limit in a fresh shop


def orders(db) -> list[dict]:
    return [dict(r) for r in db.execute("SELECT * FROM assistant_orders ORDER BY id")]


def money(reserved=0, spent=0) -> dict[str, int]:
    return {"limit_cents": LIMIT, "reserved_cents": reserved, "spent_cents": spent}


def draft(db, held, proposal=VANILLA, *, supplier=SUPPLIER, now=None):
    return propose(db, held, supplier=supplier, proposal=proposal, now=now)


def approved(db, held, policy, proposal=VANILLA, *, ttl=600.0, now=None, supplier=SUPPLIER):
    order = draft(db, held, proposal, supplier=supplier, now=now)
    return approve(
        db,
        order["id"],
        actor=OPERATOR,
        digest=order["digest"],
        policy=policy,
        ttl=ttl,
        now=now,
    )


def set_status(db, order_id, *statuses):
    """Walk an order through status moves with raw SQL (the trigger still vets each one)."""
    for status in statuses:
        db.execute("UPDATE assistant_orders SET status = ? WHERE id = ?", (status, order_id))


def receipt_for(order, status="ACCEPTED"):
    return {"operation": order["operation"], "status": status, "supplier": SUPPLIER}


def test_the_fixture_amount_is_what_the_proposal_costs():
    assert amount_cents(VANILLA) == VANILLA_CENTS


# ---------------------------------------------------------------- SpendingPolicy


def test_a_policy_keeps_its_operators_as_a_frozen_set():
    policy = SpendingPolicy(["lucy", "sam"], total_cents=100, automatic_order_cents=50)
    assert policy.operators == frozenset({"lucy", "sam"})
    with pytest.raises(AttributeError):
        policy.total_cents = 10**9


@pytest.mark.parametrize("operators", [set(), {""}, {"lucy", 3}, [None]])
def test_a_policy_needs_named_operators(operators):
    with pytest.raises(ValueError, match="operator"):
        SpendingPolicy(operators, total_cents=100, automatic_order_cents=50)


def test_a_policy_refuses_a_bare_string_as_its_operators():
    # frozenset("lucy") is {"l", "u", "c", "y"}: "lucy" could not approve, and "l" could.
    with pytest.raises(ValueError, match="operator"):
        SpendingPolicy("lucy", total_cents=100, automatic_order_cents=50)


@pytest.mark.parametrize("field", ["total_cents", "automatic_order_cents"])
@pytest.mark.parametrize("value", [-1, 1.5, "100", True, None])
def test_a_policy_needs_whole_non_negative_cents(field, value):
    amounts = {"total_cents": 100, "automatic_order_cents": 50, field: value}
    with pytest.raises(ValueError, match=field):
        SpendingPolicy({"lucy"}, **amounts)


# ---------------------------------------------------------------- propose


def test_the_holder_proposes_a_draft_with_its_canonical_proposal_digest_and_amount(ch11_shop, hold):
    db, _ = ch11_shop
    held = hold()
    order = draft(db, held, dict(reversed(VANILLA.items())))  # its keys in another order
    [row] = orders(db)
    assert row == order
    assert (row["work_id"], row["supplier"], row["status"]) == (held.work_id, SUPPLIER, "DRAFT")
    assert row["proposal"] == '{"quantity":6,"sku":"vanilla-tub","unit_cents":450}'
    assert row["digest"] == digest(VANILLA)
    assert row["amount_cents"] == VANILLA_CENTS
    assert (row["approved_by"], row["approval_expires"], row["receipt"]) == (None, None, None)
    assert account(db) == money()


def test_the_operation_id_is_derived_from_work_target_and_canonical_proposal(ch11_shop, hold):
    db, _ = ch11_shop
    first, second = hold("w-1"), hold("w-2")
    a = draft(db, first)
    b = draft(db, second)
    c = draft(db, first, supplier="bakery")
    d = draft(db, first, {**VANILLA, "quantity": 7})
    assert a["operation"] == operation_id(first.work_id, SUPPLIER, VANILLA)
    assert a["operation"].startswith("op-")
    assert len({a["operation"], b["operation"], c["operation"], d["operation"]}) == 4


def test_proposing_the_same_order_again_returns_the_same_row(ch11_shop, hold):
    db, _ = ch11_shop
    held = hold()
    first = draft(db, held)
    again = draft(db, held, dict(reversed(list(VANILLA.items()))))
    assert again == first
    assert len(orders(db)) == 1


def test_proposing_again_after_approval_returns_the_approved_order_unchanged(
    ch11_shop, hold, policy, snapshot
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    before = snapshot()
    assert draft(db, held) == order
    assert snapshot() == before


def _another_worker(db, held, now):
    return replace(held, worker_id="worker-2"), now


def _older_generation(db, held, now):
    return replace(held, worker_id="worker-1#0"), now


def _expired(db, held, now):
    return held, now + 61


def _at_expiry(db, held, now):
    return held, now + 60


def _lease_of_another(db, held, now):
    db.execute(
        "UPDATE assignment_leases SET worker_id = 'worker-4' WHERE work_id = ?", (held.work_id,)
    )
    return held, now


def _no_lease(db, held, now):
    db.execute("DELETE FROM assignment_leases WHERE work_id = ?", (held.work_id,))
    return held, now


def _finished(db, held, now):
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (held.work_id,))
    return held, now


# Each way to not be the current holder of work "worker-1" runs under a 60 s lease.
NOT_HOLDER = {
    "another worker id": _another_worker,
    "same owner, older generation": _older_generation,
    "expired lease": _expired,
    "lease exactly at expiry": _at_expiry,
    "lease of another worker": _lease_of_another,
    "no lease row": _no_lease,
    "finished work": _finished,
}


@pytest.mark.parametrize("why", NOT_HOLDER)
def test_only_the_current_holder_may_propose_and_a_refusal_writes_nothing(ch11_shop, hold, why):
    db, _ = ch11_shop
    now = time.time()
    caller, at = NOT_HOLDER[why](db, hold("worker-1", ttl=60, now=now), now)
    with pytest.raises(PermissionError):
        draft(db, caller, now=at)
    assert orders(db) == []


def test_proposing_for_pending_or_missing_work_is_refused(ch11_shop, hold, work_id_of):
    db, queue = ch11_shop
    assert queue.admit("pending-source", "s", "nobody runs this") == "accepted"
    pending = work_id_of(queue, "pending-source")
    held = hold()
    for caller in (replace(held, work_id=pending), replace(held, work_id=pending + 100)):
        with pytest.raises(PermissionError):
            draft(db, caller)
    assert orders(db) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"sku": "vanilla-tub", "quantity": 0, "unit_cents": 450},
        {"sku": "Vanilla Tub", "quantity": 6, "unit_cents": 450},
        {"sku": "vanilla-tub", "quantity": 6},
        {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450, "note": "rush"},
        {"sku": "vanilla-tub", "quantity": True, "unit_cents": 450},
        ["vanilla-tub", 6, 450],
    ],
)
def test_an_invalid_proposal_is_refused_with_nothing_written(ch11_shop, hold, bad):
    db, _ = ch11_shop
    held = hold()
    with pytest.raises(ValueError):
        draft(db, held, bad)
    assert orders(db) == []


@pytest.mark.parametrize("supplier", ["", None])
def test_a_proposal_needs_a_supplier_identity(ch11_shop, hold, supplier):
    db, _ = ch11_shop
    held = hold()
    with pytest.raises(ValueError, match="supplier"):
        draft(db, held, supplier=supplier)
    assert orders(db) == []


# ---------------------------------------------------------------- approve


def test_an_operator_approves_by_digest_until_the_ttl_and_the_money_is_reserved(
    ch11_shop, hold, policy
):
    db, _ = ch11_shop
    order = draft(db, hold())
    now = time.time()
    result = approve(
        db,
        order["id"],
        actor=OPERATOR,
        digest=order["digest"],
        policy=policy,
        ttl=120,
        now=now,
    )
    row = get_order(db, order["id"])
    assert result == row
    assert (row["status"], row["approved_by"]) == ("APPROVED", OPERATOR)
    assert row["approval_expires"] == pytest.approx(now + 120)
    assert account(db) == money(reserved=VANILLA_CENTS)


@pytest.fixture
def refused_approval(ch11_shop, snapshot):
    """Try an approval that must be refused; the orders and the account must not change."""
    db, _ = ch11_shop

    def attempt(order_id, *, policy, error=PermissionError, match=None, **changes):
        order = get_order(db, order_id)
        arguments = {"actor": OPERATOR, "digest": order["digest"], "ttl": 600.0, **changes}
        before = snapshot()
        with pytest.raises(error, match=match):
            approve(db, order_id, policy=policy, **arguments)
        assert snapshot() == before

    return attempt


def test_approval_is_refused_to_someone_not_on_the_allowlist(
    ch11_shop, hold, policy, refused_approval
):
    db, _ = ch11_shop
    order = draft(db, hold())
    refused_approval(order["id"], actor="assistant", policy=policy, match="not an operator")
    assert get_order(db, order["id"])["status"] == "DRAFT"


def test_approval_of_another_digest_is_refused(ch11_shop, hold, policy, refused_approval):
    db, _ = ch11_shop
    order = draft(db, hold())
    other = digest({**VANILLA, "quantity": 60})
    refused_approval(order["id"], digest=other, policy=policy, match="digest")


@pytest.mark.parametrize("status", ["APPROVED", "REVOKED"])
def test_only_a_draft_can_be_approved(ch11_shop, hold, policy, refused_approval, status):
    db, _ = ch11_shop
    order = approved(db, hold(), policy)
    if status == "REVOKED":
        revoke(db, order["id"], actor=OPERATOR, policy=policy)
    refused_approval(order["id"], policy=policy, match="only a DRAFT")


def test_an_order_above_the_automatic_ceiling_is_refused(ch11_shop, hold, refused_approval):
    db, _ = ch11_shop
    strict = SpendingPolicy({OPERATOR}, total_cents=10_000, automatic_order_cents=VANILLA_CENTS - 1)
    order = draft(db, hold())
    refused_approval(order["id"], policy=strict, match="automatic order ceiling")


def test_an_order_exactly_at_both_ceilings_is_approved(ch11_shop, hold):
    db, _ = ch11_shop
    exact = SpendingPolicy(
        {OPERATOR}, total_cents=VANILLA_CENTS, automatic_order_cents=VANILLA_CENTS
    )
    assert approved(db, hold(), exact)["status"] == "APPROVED"
    assert account(db) == money(reserved=VANILLA_CENTS)


def test_two_orders_that_each_fit_but_together_exceed_the_account_are_refused(
    ch11_shop, hold, refused_approval
):
    db, _ = ch11_shop
    tight = SpendingPolicy({OPERATOR}, total_cents=5_000, automatic_order_cents=5_000)
    held = hold()
    approved(db, held, tight)
    second = draft(db, held, {**VANILLA, "sku": "chocolate-tub"})
    refused_approval(second["id"], policy=tight, match="account ceiling")
    assert account(db) == money(reserved=VANILLA_CENTS)


def test_money_already_spent_counts_against_the_account_ceiling(ch11_shop, hold, refused_approval):
    db, _ = ch11_shop
    tight = SpendingPolicy({OPERATOR}, total_cents=5_000, automatic_order_cents=5_000)
    held = hold()
    first = approved(db, held, tight)
    set_status(db, first["id"], "SENDING")
    record_receipt(db, first["id"], receipt_for(first))
    second = draft(db, held, {**VANILLA, "sku": "chocolate-tub"})
    refused_approval(second["id"], policy=tight, match="account ceiling")
    assert account(db) == money(spent=VANILLA_CENTS)


def test_the_accounts_own_limit_caps_a_more_generous_policy(
    ch11_shop, hold, policy, refused_approval
):
    db, _ = ch11_shop
    db.execute("UPDATE spending_account SET limit_cents = ?", (VANILLA_CENTS - 1,))
    order = draft(db, hold())
    refused_approval(order["id"], policy=policy, match="account ceiling")


@pytest.mark.parametrize("ttl", [0, -5, float("nan"), float("inf"), 86_401, "600", None])
def test_an_approval_needs_a_ttl_above_zero_and_at_most_a_day(
    ch11_shop, hold, policy, refused_approval, ttl
):
    db, _ = ch11_shop
    order = draft(db, hold())
    refused_approval(order["id"], policy=policy, ttl=ttl, error=ValueError, match="86400")


def test_approving_an_order_that_does_not_exist_is_a_value_error(ch11_shop, policy, snapshot):
    db, _ = ch11_shop
    before = snapshot()
    with pytest.raises(ValueError, match="no order"):
        approve(db, 42, actor=OPERATOR, digest="0" * 64, policy=policy)
    assert snapshot() == before


# ---------------------------------------------------------------- revoke


def test_revoking_an_approved_order_releases_its_reservation(ch11_shop, hold, policy):
    db, _ = ch11_shop
    order = approved(db, hold(), policy)
    revoke(db, order["id"], actor=OPERATOR, policy=policy)
    row = get_order(db, order["id"])
    assert (row["status"], row["revoked_by"]) == ("REVOKED", OPERATOR)
    assert account(db) == money()


def test_revoking_a_draft_leaves_the_account_alone(ch11_shop, hold, policy):
    db, _ = ch11_shop
    order = draft(db, hold())
    revoke(db, order["id"], actor=OPERATOR, policy=policy)
    assert get_order(db, order["id"])["status"] == "REVOKED"
    assert account(db) == money()


def test_only_an_operator_may_revoke(ch11_shop, hold, policy, snapshot):
    db, _ = ch11_shop
    order = approved(db, hold(), policy)
    before = snapshot()
    with pytest.raises(PermissionError, match="not an operator"):
        revoke(db, order["id"], actor="assistant", policy=policy)
    assert snapshot() == before


@pytest.mark.parametrize("statuses", [("SENDING",), ("SENDING", "UNKNOWN")])
def test_an_order_that_may_be_at_the_supplier_cannot_be_revoked(
    ch11_shop, hold, policy, snapshot, statuses
):
    db, _ = ch11_shop
    order = approved(db, hold(), policy)
    set_status(db, order["id"], *statuses)
    before = snapshot()
    with pytest.raises(PermissionError, match="may already be at the supplier"):
        revoke(db, order["id"], actor=OPERATOR, policy=policy)
    assert snapshot() == before


# ---------------------------------------------------------------- record_receipt


@pytest.fixture
def sent(ch11_shop, hold, policy):
    """An approved order marked SENDING, as execute leaves it just before the request."""
    db, _ = ch11_shop
    order = approved(db, hold(), policy)
    set_status(db, order["id"], "SENDING")
    return get_order(db, order["id"])


def test_an_accepted_receipt_moves_the_reservation_to_spent(ch11_shop, sent):
    db, _ = ch11_shop
    receipt = receipt_for(sent)
    record_receipt(db, sent["id"], receipt)
    row = get_order(db, sent["id"])
    assert row["status"] == "ACCEPTED"
    assert json.loads(row["receipt"]) == receipt
    assert account(db) == money(spent=VANILLA_CENTS)


def test_a_rejected_receipt_releases_the_reservation(ch11_shop, sent):
    db, _ = ch11_shop
    record_receipt(db, sent["id"], receipt_for(sent, "REJECTED"))
    assert get_order(db, sent["id"])["status"] == "REJECTED"
    assert account(db) == money()


def test_an_unknown_order_is_settled_by_its_receipt(ch11_shop, sent):
    db, _ = ch11_shop
    set_status(db, sent["id"], "UNKNOWN")
    record_receipt(db, sent["id"], receipt_for(sent))
    assert get_order(db, sent["id"])["status"] == "ACCEPTED"
    assert account(db) == money(spent=VANILLA_CENTS)


def test_the_same_receipt_twice_changes_nothing(ch11_shop, sent, snapshot):
    db, _ = ch11_shop
    record_receipt(db, sent["id"], receipt_for(sent))
    before = snapshot()
    record_receipt(db, sent["id"], receipt_for(sent))
    assert snapshot() == before
    assert account(db) == money(spent=VANILLA_CENTS)


def test_a_contradicting_receipt_is_refused(ch11_shop, sent, snapshot):
    db, _ = ch11_shop
    record_receipt(db, sent["id"], receipt_for(sent))
    before = snapshot()
    with pytest.raises(RuntimeError, match="the supplier now says REJECTED"):
        record_receipt(db, sent["id"], receipt_for(sent, "REJECTED"))
    assert snapshot() == before


@pytest.mark.parametrize(
    "receipt",
    [
        {"operation": "op-someone-else", "status": "ACCEPTED"},
        {"status": "ACCEPTED"},
        "ACCEPTED",
        None,
    ],
)
def test_a_receipt_for_another_operation_or_not_a_receipt_is_a_value_error(
    ch11_shop, sent, snapshot, receipt
):
    db, _ = ch11_shop
    before = snapshot()
    with pytest.raises(ValueError):
        record_receipt(db, sent["id"], receipt)
    assert snapshot() == before


@pytest.mark.parametrize("status", ["UNKNOWN", "SENDING", "accepted", None])
def test_a_receipt_must_be_conclusive(ch11_shop, sent, snapshot, status):
    db, _ = ch11_shop
    before = snapshot()
    with pytest.raises(ValueError, match="ACCEPTED or REJECTED"):
        record_receipt(db, sent["id"], {"operation": sent["operation"], "status": status})
    assert snapshot() == before


@pytest.mark.parametrize("status", ["DRAFT", "APPROVED", "REVOKED"])
def test_a_receipt_for_an_order_never_sent_is_refused(ch11_shop, hold, policy, snapshot, status):
    db, _ = ch11_shop
    held = hold()
    order = draft(db, held) if status == "DRAFT" else approved(db, held, policy)
    if status == "REVOKED":
        revoke(db, order["id"], actor=OPERATOR, policy=policy)
    before = snapshot()
    with pytest.raises(PermissionError, match="never sent"):
        record_receipt(db, order["id"], receipt_for(order))
    assert snapshot() == before


@pytest.mark.parametrize(
    "start, target",
    [
        (("APPROVED",), "ACCEPTED"),  # skips SENDING
        (("APPROVED",), "UNKNOWN"),
        (("APPROVED", "SENDING", "ACCEPTED"), "SENDING"),  # conclusive is final
        (("APPROVED", "SENDING", "REJECTED"), "ACCEPTED"),
    ],
)
def test_the_database_refuses_an_illegal_order_status_move(
    ch11_shop, hold, policy, snapshot, start, target
):
    db, _ = ch11_shop
    order = approved(db, hold(), policy)
    set_status(db, order["id"], *start[1:])
    before = snapshot()
    with pytest.raises(sqlite3.IntegrityError, match="illegal order status move"):
        set_status(db, order["id"], target)
    assert snapshot() == before


# ---------------------------------------------------------------- execute, with a fake supplier


@pytest.fixture
def refused_execute(ch11_shop, snapshot):
    """Run an execute that must be refused: nothing written, and the supplier never asked."""
    db, _ = ch11_shop

    def attempt(held, order_id, supplier, *, policy, match, now=None):
        before = snapshot()
        calls = list(supplier.calls)
        with pytest.raises(PermissionError, match=match):
            execute(db, held, order_id, supplier, policy=policy, now=now)
        assert snapshot() == before
        assert supplier.calls == calls  # neither lookup nor order was asked

    return attempt


def test_execute_sends_an_approved_order_once_and_records_the_receipt(
    ch11_shop, hold, policy, fake_supplier
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    receipt = execute(db, held, order["id"], fake_supplier, policy=policy)
    assert receipt == fake_supplier.known[order["operation"]]
    assert receipt["status"] == "ACCEPTED"
    assert fake_supplier.calls == [("order", order["operation"])]  # an APPROVED order: no lookup
    row = get_order(db, order["id"])
    assert row["status"] == "ACCEPTED"
    assert json.loads(row["receipt"]) == receipt
    assert account(db) == money(spent=VANILLA_CENTS)


def test_the_chapters_recovery_query_finds_an_order_by_id_and_execute_sends_it(
    ch11_shop, hold, policy, fake_supplier
):
    """Chapter 13's replacement reads the work's open orders by ``id`` and hands each id to
    ``execute`` positionally, with only ``policy`` as a keyword."""
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    draft(db, held, {**VANILLA, "quantity": 1})  # a DRAFT is not the replacement's to send
    found = [
        row[0]
        for row in db.connection.execute(
            "SELECT id FROM assistant_orders WHERE work_id = ?"
            " AND status IN ('APPROVED', 'SENDING', 'UNKNOWN') ORDER BY created, id",
            (held.work_id,),
        )
    ]
    assert found == [order["id"]]
    receipts = [execute(db, held, each, fake_supplier, policy=policy) for each in found]
    assert [receipt.get("status") for receipt in receipts] == ["ACCEPTED"]
    assert fake_supplier.orders_sent == 1


def test_execute_records_a_rejection_and_releases_the_money(ch11_shop, hold, policy, make_supplier):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    supplier = make_supplier(status="REJECTED")
    assert execute(db, held, order["id"], supplier, policy=policy)["status"] == "REJECTED"
    assert get_order(db, order["id"])["status"] == "REJECTED"
    assert account(db) == money()


def test_execute_refuses_an_order_of_another_work(
    ch11_shop, hold, policy, fake_supplier, refused_execute
):
    db, _ = ch11_shop
    owner, other = hold("w-1"), hold("w-2")
    order = approved(db, owner, policy)
    refused_execute(other, order["id"], fake_supplier, policy=policy, match="belongs to work")


@pytest.mark.parametrize("why", NOT_HOLDER)
def test_execute_refuses_a_caller_that_is_not_the_current_holder(
    ch11_shop, hold, policy, fake_supplier, refused_execute, why
):
    db, _ = ch11_shop
    now = time.time()
    held = hold("worker-1", ttl=60, now=now)
    order = approved(db, held, policy, now=now)
    caller, at = NOT_HOLDER[why](db, held, now)
    refused_execute(
        caller, order["id"], fake_supplier, policy=policy, now=at, match="not held by|lease"
    )
    assert get_order(db, order["id"])["status"] == "APPROVED"


def test_a_superseded_generation_cannot_send_through_execute(
    ch11_shop, hold, policy, fake_supplier, refused_execute
):
    # Chapter 13's point: the unchanged worker_id comparison is a generation fence.
    db, _ = ch11_shop
    old = hold("lucy-bot#1")
    order = approved(db, old, policy)
    db.execute("UPDATE work SET worker_id = 'lucy-bot#2' WHERE work_id = ?", (old.work_id,))
    db.execute(
        "UPDATE assignment_leases SET worker_id = 'lucy-bot#2', expires = ? WHERE work_id = ?",
        (time.time() + 60, old.work_id),
    )
    refused_execute(
        old, order["id"], fake_supplier, policy=policy, match="not held by 'lucy-bot#1'"
    )
    new = replace(old, worker_id="lucy-bot#2")
    assert execute(db, new, order["id"], fake_supplier, policy=policy)["status"] == "ACCEPTED"
    assert fake_supplier.orders_sent == 1


def test_execute_refuses_a_supplier_the_order_is_not_for(
    ch11_shop, hold, policy, make_supplier, refused_execute
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    refused_execute(
        held,
        order["id"],
        make_supplier(identity="bakery"),
        policy=policy,
        match="is for 'dairy', not 'bakery'",
    )


def test_a_conclusive_order_returns_its_receipt_without_asking_the_supplier(
    ch11_shop, hold, policy, fake_supplier, snapshot
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    first = execute(db, held, order["id"], fake_supplier, policy=policy)
    before, calls = snapshot(), list(fake_supplier.calls)
    again = execute(db, held, order["id"], fake_supplier, policy=policy)
    assert again == first
    assert fake_supplier.calls == calls
    assert snapshot() == before


def test_a_conclusive_order_is_still_refused_to_a_non_holder_or_another_supplier(
    ch11_shop, hold, policy, fake_supplier, make_supplier, refused_execute
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    execute(db, held, order["id"], fake_supplier, policy=policy)
    refused_execute(
        replace(held, worker_id="intruder"),
        order["id"],
        fake_supplier,
        policy=policy,
        match="not held by",
    )
    refused_execute(
        held,
        order["id"],
        make_supplier(identity="bakery"),
        policy=policy,
        match="not 'bakery'",
    )


@pytest.mark.parametrize("statuses", [("SENDING",), ("SENDING", "UNKNOWN")])
def test_an_uncertain_order_is_looked_up_first_and_recorded_without_a_second_send(
    ch11_shop, hold, policy, fake_supplier, statuses
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    set_status(db, order["id"], *statuses)
    there = fake_supplier.receipt(order["operation"])
    fake_supplier.known[order["operation"]] = there
    assert execute(db, held, order["id"], fake_supplier, policy=policy) == there
    assert fake_supplier.calls == [("lookup", order["operation"])]
    assert get_order(db, order["id"])["status"] == "ACCEPTED"
    assert account(db) == money(spent=VANILLA_CENTS)


def test_an_uncertain_order_is_settled_by_lookup_even_after_its_approval_expired(
    ch11_shop, hold, policy, fake_supplier
):
    db, _ = ch11_shop
    now = time.time()
    held = hold(ttl=600, now=now)
    order = approved(db, held, policy, ttl=10, now=now)
    set_status(db, order["id"], "SENDING", "UNKNOWN")
    fake_supplier.known[order["operation"]] = fake_supplier.receipt(order["operation"])
    receipt = execute(db, held, order["id"], fake_supplier, policy=policy, now=now + 60)
    assert receipt["status"] == "ACCEPTED"
    assert fake_supplier.orders_sent == 0
    assert get_order(db, order["id"])["status"] == "ACCEPTED"
    assert account(db) == money(spent=VANILLA_CENTS)


def test_an_unknown_order_the_supplier_never_saw_is_sent_again_once(
    ch11_shop, hold, policy, fake_supplier
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    set_status(db, order["id"], "SENDING", "UNKNOWN")
    receipt = execute(db, held, order["id"], fake_supplier, policy=policy)
    assert receipt["status"] == "ACCEPTED"
    assert fake_supplier.calls == [("lookup", order["operation"]), ("order", order["operation"])]
    assert get_order(db, order["id"])["status"] == "ACCEPTED"
    assert account(db) == money(spent=VANILLA_CENTS)


def test_a_lookup_that_fails_leaves_the_order_unknown_and_sends_nothing(
    ch11_shop, hold, policy, make_supplier
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    set_status(db, order["id"], "SENDING")
    supplier = make_supplier(lookup_error=ConnectionError("connection refused"))
    receipt = execute(db, held, order["id"], supplier, policy=policy)
    assert (receipt["operation"], receipt["status"]) == (order["operation"], "UNKNOWN")
    assert supplier.calls == [("lookup", order["operation"])]
    assert get_order(db, order["id"])["status"] == "UNKNOWN"
    assert account(db) == money(reserved=VANILLA_CENTS)


def test_a_takeover_during_the_lookup_is_caught_by_the_recheck_before_sending(
    ch11_shop, hold, policy, make_supplier
):
    db, _ = ch11_shop
    held = hold("lucy-bot#1")
    order = approved(db, held, policy)
    set_status(db, order["id"], "SENDING", "UNKNOWN")

    def replacement_takes_over(operation):
        db.execute("UPDATE work SET worker_id = 'lucy-bot#2' WHERE work_id = ?", (held.work_id,))
        db.execute(
            "UPDATE assignment_leases SET worker_id = 'lucy-bot#2' WHERE work_id = ?",
            (held.work_id,),
        )

    supplier = make_supplier(on_lookup=replacement_takes_over)
    with pytest.raises(PermissionError, match="not held by 'lucy-bot#1'"):
        execute(db, held, order["id"], supplier, policy=policy)
    assert supplier.calls == [("lookup", order["operation"])]
    assert get_order(db, order["id"])["status"] == "UNKNOWN"
    assert account(db) == money(reserved=VANILLA_CENTS)


def test_execute_refuses_a_revoked_or_never_approved_order(
    ch11_shop, hold, policy, fake_supplier, refused_execute
):
    db, _ = ch11_shop
    held = hold()
    revoked = approved(db, held, policy)
    revoke(db, revoked["id"], actor=OPERATOR, policy=policy)
    refused_execute(
        held, revoked["id"], fake_supplier, policy=policy, match="REVOKED, not approved"
    )
    unapproved = draft(db, held, {**VANILLA, "quantity": 1})
    refused_execute(
        held, unapproved["id"], fake_supplier, policy=policy, match="DRAFT, not approved"
    )


@pytest.mark.parametrize("statuses", [(), ("SENDING", "UNKNOWN")])
def test_execute_refuses_to_send_on_an_expired_approval(
    ch11_shop, hold, policy, fake_supplier, snapshot, statuses
):
    db, _ = ch11_shop
    now = time.time()
    held = hold(ttl=600, now=now)
    order = approved(db, held, policy, ttl=10, now=now)
    set_status(db, order["id"], *statuses)
    before = snapshot()
    with pytest.raises(PermissionError, match="approval of order .* has expired"):
        execute(db, held, order["id"], fake_supplier, policy=policy, now=now + 10)
    assert snapshot() == before
    assert fake_supplier.orders_sent == 0  # an uncertain one was only looked up


@pytest.mark.parametrize(
    "total, automatic, match",
    [
        (10_000, VANILLA_CENTS - 1, "automatic order ceiling"),
        (VANILLA_CENTS - 1, 10_000, "account ceiling"),
    ],
)
def test_execute_rechecks_the_ceiling_of_the_policy_in_force(
    ch11_shop, hold, policy, fake_supplier, refused_execute, total, automatic, match
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    stricter = SpendingPolicy({OPERATOR}, total_cents=total, automatic_order_cents=automatic)
    refused_execute(held, order["id"], fake_supplier, policy=stricter, match=match)


def test_execute_refuses_when_the_reservation_is_missing(
    ch11_shop, hold, policy, fake_supplier, refused_execute
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    db.execute("UPDATE spending_account SET reserved_cents = ?", (VANILLA_CENTS - 1,))
    refused_execute(
        held, order["id"], fake_supplier, policy=policy, match="reservation .* is missing"
    )


@pytest.mark.parametrize("timeout", [30.0, 31.0])
def test_execute_refuses_a_supplier_timeout_not_shorter_than_the_lease_left(
    ch11_shop, hold, policy, make_supplier, refused_execute, timeout
):
    db, _ = ch11_shop
    now = time.time()
    held = hold(ttl=30, now=now)
    order = approved(db, held, policy, now=now)
    refused_execute(
        held,
        order["id"],
        make_supplier(timeout=timeout),
        policy=policy,
        now=now,
        match="not shorter than the lease left",
    )
    # The same order goes through once the timeout fits inside the lease.
    fits = make_supplier(timeout=29.0)
    assert execute(db, held, order["id"], fits, policy=policy, now=now)["status"] == "ACCEPTED"


def test_a_transport_failure_leaves_the_order_unknown_with_its_reservation_kept(
    ch11_shop, hold, policy, make_supplier
):
    db, _ = ch11_shop
    held = hold()
    order = approved(db, held, policy)
    supplier = make_supplier(order_error=ConnectionError("reset by peer"))
    receipt = execute(db, held, order["id"], supplier, policy=policy)
    assert (receipt["operation"], receipt["status"]) == (order["operation"], "UNKNOWN")
    assert supplier.calls == [("order", order["operation"])]
    row = get_order(db, order["id"])
    assert (row["status"], row["receipt"]) == ("UNKNOWN", None)
    assert account(db) == money(reserved=VANILLA_CENTS)


# ---------------------------------------------------------------- execute, with a real supplier


def test_a_real_supplier_accepts_an_approved_order_once(ch11_shop, hold, policy, tmp_path):
    db, _ = ch11_shop
    held = hold()
    with supplier_process(tmp_path) as running:
        order = approved(db, held, policy, supplier=running.identity)
        client = running.client(timeout=2.0)
        receipt = execute(db, held, order["id"], client, policy=policy)
        again = execute(db, held, order["id"], client, policy=policy)
    assert receipt["status"] == "ACCEPTED" and again == receipt
    [entry] = ledger_orders(running.database)
    assert (entry["operation"], entry["status"]) == (order["operation"], "ACCEPTED")
    assert (entry["body"], entry["amount_cents"]) == (VANILLA, VANILLA_CENTS)
    row = get_order(db, order["id"])
    assert row["status"] == "ACCEPTED"
    assert json.loads(row["receipt"]) == receipt
    assert account(db) == money(spent=VANILLA_CENTS)


def test_a_reply_lost_after_the_supplier_committed_is_recovered_by_lookup(
    ch11_shop, hold, policy, tmp_path
):
    db, _ = ch11_shop
    held = hold()
    with supplier_process(tmp_path) as running:
        order = approved(db, held, policy, supplier=running.identity)
        running.set_faults(drop_next=1)
        client = running.client(timeout=2.0)
        lost = execute(db, held, order["id"], client, policy=policy)
        assert lost["status"] == "UNKNOWN"
        assert get_order(db, order["id"])["status"] == "UNKNOWN"
        assert account(db) == money(reserved=VANILLA_CENTS)
        found = execute(db, held, order["id"], client, policy=policy)
    assert found["status"] == "ACCEPTED"
    assert [e["operation"] for e in ledger_orders(running.database)] == [order["operation"]]
    assert account(db) == money(spent=VANILLA_CENTS)


def test_a_supplier_that_is_not_there_leaves_the_order_unknown_with_its_reservation(
    ch11_shop, hold, policy
):
    db, _ = ch11_shop
    client = SupplierClient(dead_endpoint(), identity=SUPPLIER, timeout=0.5)
    held = hold()
    order = approved(db, held, policy)
    receipt = execute(db, held, order["id"], client, policy=policy)
    assert (receipt["operation"], receipt["status"]) == (order["operation"], "UNKNOWN")
    assert get_order(db, order["id"])["status"] == "UNKNOWN"
    assert account(db) == money(reserved=VANILLA_CENTS)
    # Retrying against the same dead supplier only tries the lookup and stays UNKNOWN.
    assert execute(db, held, order["id"], client, policy=policy)["status"] == "UNKNOWN"
    assert get_order(db, order["id"])["status"] == "UNKNOWN"
    assert account(db) == money(reserved=VANILLA_CENTS)
