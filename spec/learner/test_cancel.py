"""``cancel(db, work_id, *, actor, policy, reason)``: the operator's one-transaction stop.

The holder is claimed at the real clock and works well inside its 30 s lease, so every
refusal here comes from the cancel and not from an expired lease. The orders' suppliers are
scripted stand-ins: no test here may reach a supplier after the cancel, and the stand-ins fail
the test if one does.
"""

from __future__ import annotations

import json

import pytest
from learner_support import (
    approved_order,
    lease,
    refuses,
    rows,
    snapshot,
    work,
)
from shop_fixtures import VANILLA_CENTS

from lucyshop.approval import account, approve, execute, get_order, propose
from lucyshop.lab.given.orders import OPERATOR

CHOCOLATE = {"sku": "chocolate-tub", "quantity": 4, "unit_cents": 450}  # 1800 cents
OAT = {"sku": "oat-milk", "quantity": 2, "unit_cents": 300}  # 600 cents
REASON = "the customer called to cancel"


class Scripted:
    """A supplier whose send fails the way a test needs; a lookup fails the test."""

    identity = "dairy"
    timeout = 1.0

    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.sent: list[str] = []

    def lookup(self, operation):
        pytest.fail(
            f"looked up {operation} after the cancel: nothing may reach the supplier", pytrace=False
        )

    def order(self, operation, proposal):
        if self.failure is None:
            pytest.fail(
                f"sent {operation} after the cancel: nothing may reach the supplier", pytrace=False
            )
        self.sent.append(operation)
        raise self.failure


def approve_other(db, held, policy, proposal):
    order = propose(db, held, supplier="dairy", proposal=proposal)
    return approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=policy)


def unknown_order(db, held, policy, proposal=OAT):
    """An order sent whose reply never came: UNKNOWN, its reservation kept."""
    order = approve_other(db, held, policy, proposal)
    execute(
        db,
        held,
        order["id"],
        Scripted(ConnectionError("reply lost")),
        policy=policy,
    )
    assert get_order(db, order["id"])["status"] == "UNKNOWN"
    return get_order(db, order["id"])


def sending_order(db, held, policy, proposal=CHOCOLATE):
    """An order marked SENDING whose sender died mid-send (the process, not the network)."""
    order = approve_other(db, held, policy, proposal)
    with pytest.raises(RuntimeError):
        execute(
            db,
            held,
            order["id"],
            Scripted(RuntimeError("crashed while sending")),
            policy=policy,
        )
    assert get_order(db, order["id"])["status"] == "SENDING"
    return get_order(db, order["id"])


def outcome(db, work_id):
    row = db.execute("SELECT * FROM outcomes WHERE work_id = ?", (work_id,)).fetchone()
    return None if row is None else dict(row) | {"result": json.loads(row["result"])}


def test_cancel_finishes_the_work_as_canceled_with_actor_and_reason(impl, db, held, policy):
    order = approved_order(db, held, "dairy", policy)

    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)

    assert work(db, held.work_id)["state"] == "finished", "cancelled work is finished"
    stored = outcome(db, held.work_id)
    assert stored is not None and stored["status"] == "CANCELED", (
        f"one CANCELED outcome row: {stored}"
    )
    result = stored["result"]
    assert (result.get("actor"), result.get("reason")) == (OPERATOR, REASON), (
        f"the outcome's result names who cancelled and why: {result}"
    )
    assert result.get("revoked") == [order["operation"]], (
        f"the outcome's result lists the revoked orders by operation id: {result}"
    )
    assert len(rows(db, "outcomes")) == 1


def test_cancel_advances_the_lease_generation(impl, db, held, policy):
    got = impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)

    row = lease(db, held.work_id)
    assert row["generation"] == held.generation + 1, (
        f"the cancel takes the lease at generation {held.generation + 1}, so the holder's"
        f" generation {held.generation} is superseded: {row}"
    )
    assert row["worker_id"] != held.worker_id, f"the lease no longer names the holder: {row}"
    assert outcome(db, held.work_id)["generation"] == held.generation + 1, (
        "the CANCELED outcome is written at the cancel's generation, not the holder's"
    )
    assert got["generation"] == row["generation"], f"cancel returns the generation it took: {got}"


def test_the_holder_cannot_write_its_transcript_after_a_cancel(impl, db, held, policy):
    impl.observe(db, held, {"role": "assistant", "text": "before"})  # the holder is current
    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)
    before = snapshot(db)
    with refuses(PermissionError, "the holder's observe after a cancel"):
        impl.observe(db, held, {"role": "assistant", "text": "after"})
    assert snapshot(db) == before, "a refused observe writes no transcript row"


def test_the_holder_cannot_finish_after_a_cancel(impl, db, held, policy):
    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)
    before = snapshot(db)
    with refuses(PermissionError, "the holder's finish after a cancel"):
        impl.finish(db, held, "DONE", f"finished by {held.worker_id}")
    assert snapshot(db) == before, "a refused finish changes nothing"
    assert outcome(db, held.work_id)["status"] == "CANCELED", "the CANCELED outcome stands"


def test_the_holder_cannot_send_after_a_cancel(impl, db, held, policy):
    order = approved_order(db, held, "dairy", policy)
    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)
    before = snapshot(db)
    with refuses(PermissionError, "the holder's approval.execute after a cancel"):
        execute(db, held, order["id"], Scripted(), policy=policy)
    assert snapshot(db) == before, "a refused send changes nothing"


def test_approved_and_draft_orders_are_revoked_and_their_money_released(impl, db, held, policy):
    approved = approved_order(db, held, "dairy", policy)
    draft = propose(db, held, supplier="dairy", proposal=CHOCOLATE)
    assert account(db)["reserved_cents"] == VANILLA_CENTS

    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)

    for order in (approved, draft):
        after = get_order(db, order["id"])
        assert (after["status"], after["revoked_by"]) == ("REVOKED", OPERATOR), (
            f"an unsent order is revoked by the operator: order {order['id']} "
            f"{after['status']} revoked by {after['revoked_by']!r}"
        )
    money = account(db)
    assert (money["reserved_cents"], money["spent_cents"]) == (0, 0), (
        f"the approved order's reservation is released, nothing spent: {money}"
    )
    assert sorted(outcome(db, held.work_id)["result"]["revoked"]) == sorted(
        [approved["operation"], draft["operation"]]
    ), "both revoked orders are listed"


def test_orders_that_may_be_at_the_supplier_are_left_for_reconcile(impl, db, held, policy):
    unknown = unknown_order(db, held, policy)
    sending = sending_order(db, held, policy)
    approved = approved_order(db, held, "dairy", policy)
    reserved = unknown["amount_cents"] + sending["amount_cents"]
    assert account(db)["reserved_cents"] == reserved + VANILLA_CENTS

    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)

    for order in (unknown, sending):
        after = get_order(db, order["id"])
        assert after == order, (
            f"a {order['status']} order may already be at the supplier: the cancel leaves it "
            f"untouched, got {after['status']}"
        )
    assert get_order(db, approved["id"])["status"] == "REVOKED"
    money = account(db)
    assert (money["reserved_cents"], money["spent_cents"]) == (reserved, 0), (
        f"only the unsent order's money is released; the uncertain ones keep theirs: {money}"
    )
    assert outcome(db, held.work_id)["result"]["revoked"] == [approved["operation"]], (
        "only the unsent order is listed as revoked"
    )


def test_pending_work_can_be_cancelled(impl, db, add_work, policy):
    work_id = add_work("s1", "never claimed")

    impl.cancel(db, work_id, actor=OPERATOR, policy=policy, reason=REASON)

    assert work(db, work_id)["state"] == "finished", "cancelled pending work is finished"
    assert outcome(db, work_id)["status"] == "CANCELED"
    assert lease(db, work_id)["generation"] == 1, (
        f"the cancel takes generation 1 of work never claimed: {lease(db, work_id)}"
    )
    assert impl.claim(db, "till", ttl=30) is None, "a cancelled item is never claimed"


def test_cancelled_work_is_never_taken_over_and_frees_its_session(impl, db, add_work, held, policy):
    nxt = add_work("s1", "the next turn of the same conversation")
    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)
    taken = impl.claim(db, "night", ttl=30, now=held.expires + 3600)
    assert taken is not None and taken.work_id == nxt, (
        "the cancelled turn is final and its session is free: the next turn is claimed, got "
        f"{taken}"
    )
    assert work(db, held.work_id)["state"] == "finished"


def test_finished_work_cannot_be_cancelled(impl, db, held, policy):
    impl.finish(db, held, "DONE", "nothing to order")
    before = snapshot(db)
    with refuses(PermissionError, "cancelling finished work"):
        impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)
    assert snapshot(db) == before, "a refused cancel changes nothing"


def test_cancelling_twice_is_refused(impl, db, held, policy):
    approved_order(db, held, "dairy", policy)
    impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=REASON)
    before = snapshot(db)
    with refuses(PermissionError, "cancelling work already cancelled"):
        impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason="again")
    assert snapshot(db) == before, "a second cancel changes nothing"


def test_unknown_work_cannot_be_cancelled(impl, db, held, policy):
    before = snapshot(db)
    with refuses(PermissionError, "cancelling work that does not exist"):
        impl.cancel(db, held.work_id + 100, actor=OPERATOR, policy=policy, reason=REASON)
    assert snapshot(db) == before, "a refused cancel changes nothing"


@pytest.mark.parametrize("actor", ["till", "", "LUCY"], ids=["the-holder", "empty", "wrong-case"])
def test_only_an_operator_may_cancel(impl, db, held, policy, actor):
    approved_order(db, held, "dairy", policy)
    before = snapshot(db)
    with refuses(PermissionError, f"a cancel by {actor!r}, who is not an operator"):
        impl.cancel(db, held.work_id, actor=actor, policy=policy, reason=REASON)
    assert snapshot(db) == before, (
        "a refused cancel changes nothing: work, lease, outcomes, orders, money"
    )
    impl.observe(db, held, {"role": "assistant", "text": "still mine"})  # still the holder


@pytest.mark.parametrize("reason", ["", "   ", None], ids=["empty", "blank", "none"])
def test_a_cancel_needs_a_reason(impl, db, held, policy, reason):
    approved_order(db, held, "dairy", policy)
    before = snapshot(db)
    with refuses(ValueError, f"a cancel with the reason {reason!r}"):
        impl.cancel(db, held.work_id, actor=OPERATOR, policy=policy, reason=reason)
    assert snapshot(db) == before, "a refused cancel changes nothing"
