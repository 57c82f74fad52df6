"""``recover_once(db, *, owner, supplier, policy, ttl=30) -> dict``: continue from the records,
never a model.

The first holder claimed a minute in the past (``claim``'s ``now``), so its lease has already
expired in real time when ``recover_once``, which reads the real clock, takes over. The
result is the chapter's dict: ``{"status": "IDLE"}``, else its status, ``work`` and
``generation``; a BLOCKED outcome row says why in its result text.
"""

from __future__ import annotations

import inspect
import time

import pytest
from learner_support import approved_order, lease, rows, snapshot, work
from shop_fixtures import REJECTED_SKU, VANILLA_CENTS, dead_endpoint

from lucyshop.approval import account, approve, execute, get_order, propose
from lucyshop.lab.given.orders import OPERATOR
from lucyshop.supplier import SupplierClient, ledger_orders

OAT = {"sku": REJECTED_SKU, "quantity": 2, "unit_cents": 300}  # the suppliers reject it


@pytest.fixture
def past():
    """A moment 60 s ago: a 30 s lease taken then has expired by now."""
    return time.time() - 60


@pytest.fixture
def crashed(impl, db, add_work, policy, past):
    """A holder claimed the work, proposed six vanilla tubs, got them approved, and died."""

    def make():
        work_id = add_work("s1", "order six vanilla tubs")
        held = impl.claim(db, "till", ttl=30, now=past)
        order = approved_order(db, held, "dairy", policy, now=past + 1)
        assert lease(db, work_id)["expires"] < time.time(), "the first holder's lease has expired"
        return held, order

    return make


class Spy:
    """A supplier client that counts what it was asked."""

    def __init__(self, client):
        self.client, self.identity, self.timeout = client, client.identity, client.timeout
        self.lookups, self.orders = [], []

    def lookup(self, operation):
        self.lookups.append(operation)
        return self.client.lookup(operation)

    def order(self, operation, proposal):
        self.orders.append(operation)
        return self.client.order(operation, proposal)


def outcome(db, work_id):
    row = db.execute("SELECT * FROM outcomes WHERE work_id = ?", (work_id,)).fetchone()
    return None if row is None else dict(row)


def test_there_is_no_model_to_pass(impl, db, add_work, supplier, policy):
    parameters = inspect.signature(impl.recover_once).parameters
    assert list(parameters) == ["db", "owner", "supplier", "policy", "ttl"], (
        f"recover_once takes the records, an owner, a supplier and the policy: {list(parameters)}"
    )
    assert not any("model" in name for name in parameters), "recovery must not consult a model"
    add_work()
    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy, ttl=5)
    assert got["status"] == "BLOCKED", (
        f"with nothing but the records and a supplier, it decides: {got}"
    )


def test_an_approved_order_is_continued_to_accepted(impl, db, crashed, supplier, policy):
    held, order = crashed()
    client = Spy(supplier.client(timeout=1.0))

    got = impl.recover_once(db, owner="rescuer", supplier=client, policy=policy)

    assert got == {"status": "DONE", "work": held.work_id, "generation": 2}, (
        f"the replacement takes over at generation 2 and is DONE, got {got}"
    )
    assert client.orders == [order["operation"]], (
        "the approved order was sent once, by its operation id"
    )
    stored = outcome(db, held.work_id)
    assert (stored["generation"], stored["status"]) == (2, "DONE"), f"the outcome row: {stored}"
    assert work(db, held.work_id)["state"] == "finished"
    assert get_order(db, order["id"])["status"] == "ACCEPTED"
    money = account(db)
    assert (money["reserved_cents"], money["spent_cents"]) == (0, VANILLA_CENTS), (
        f"the reservation moved to spent: {money}"
    )
    ledger = ledger_orders(supplier.database)
    assert [o["operation"] for o in ledger] == [order["operation"]], (
        f"the supplier's own ledger holds exactly the one order: {ledger}"
    )
    assert rows(db, "transcript") == [], "recovery from records writes no transcript"


def test_an_order_the_supplier_rejects_is_conclusive_and_done(
    impl, db, add_work, supplier, policy, past
):
    work_id = add_work("s1", "order two oat milks")
    held = impl.claim(db, "till", ttl=30, now=past)
    order = propose(db, held, supplier="dairy", proposal=OAT, now=past + 1)
    approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=policy, now=past + 1)

    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy)

    assert got == {"status": "DONE", "work": work_id, "generation": 2}, (
        f"a REJECTED receipt is a conclusive answer: the work is DONE, got {got}"
    )
    assert get_order(db, order["id"])["status"] == "REJECTED"
    assert account(db)["reserved_cents"] == 0, "the rejection released the reservation"


def test_a_second_recovery_after_done_is_idle(impl, db, crashed, supplier, policy):
    crashed()
    client = supplier.client()
    done = impl.recover_once(db, owner="rescuer", supplier=client, policy=policy)
    assert done["status"] == "DONE", done
    before = snapshot(db)
    again = impl.recover_once(db, owner="rescuer", supplier=client, policy=policy)
    assert again == {"status": "IDLE"}, f"nothing left to recover: IDLE, got {again}"
    assert snapshot(db) == before, "an idle recovery changes nothing"
    assert len(ledger_orders(supplier.database)) == 1, "still one order at the supplier"


def test_an_order_already_sent_is_looked_up_not_sent_again(
    impl, db, crashed, supplier, policy, past
):
    held, order = crashed()
    supplier.set_faults(drop_next=1)  # the supplier commits, then the reply is lost
    sent = execute(db, held, order["id"], supplier.client(), policy=policy, now=past + 2)
    assert sent["status"] == "UNKNOWN", sent
    client = Spy(supplier.client())

    got = impl.recover_once(db, owner="rescuer", supplier=client, policy=policy)

    assert (got["status"], got["generation"]) == ("DONE", 2), (
        f"the lookup settles it: DONE, got {got}"
    )
    assert client.lookups == [order["operation"]] and client.orders == [], (
        f"an uncertain order is looked up by its operation id, never sent again: "
        f"lookups {client.lookups}, orders {client.orders}"
    )
    assert get_order(db, order["id"])["status"] == "ACCEPTED"
    assert len(ledger_orders(supplier.database)) == 1, "still one order at the supplier"


def test_work_without_an_order_is_blocked_for_a_person(impl, db, add_work, supplier, policy, past):
    work_id = add_work()
    impl.claim(db, "till", ttl=30, now=past)
    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy)
    assert got == {"status": "BLOCKED", "work": work_id, "generation": 2}, (
        f"no approved order: BLOCKED for an operator, got {got}"
    )
    stored = outcome(db, work_id)
    assert (stored["generation"], stored["status"]) == (2, "BLOCKED"), f"the outcome row: {stored}"
    assert stored["result"].strip(), "a BLOCKED outcome says why in its result"
    assert work(db, work_id)["state"] == "finished"
    assert ledger_orders(supplier.database) == [], "nothing was sent"


def test_pending_work_without_an_order_is_blocked_at_generation_1(
    impl, db, add_work, supplier, policy
):
    work_id = add_work()
    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy)
    assert got == {"status": "BLOCKED", "work": work_id, "generation": 1}, f"got {got}"


def test_a_proposal_nobody_approved_is_not_sent(impl, db, add_work, supplier, policy, past):
    work_id = add_work()
    held = impl.claim(db, "till", ttl=30, now=past)
    draft = propose(
        db,
        held,
        supplier="dairy",
        proposal={"sku": "oat-milk", "quantity": 2, "unit_cents": 300},
        now=past + 1,
    )
    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy)
    assert got["status"] == "BLOCKED", f"a DRAFT is not approved: BLOCKED, got {got}"
    assert get_order(db, draft["id"])["status"] == "DRAFT"
    assert ledger_orders(supplier.database) == [], "nothing was sent"
    assert outcome(db, work_id)["status"] == "BLOCKED"


def test_a_supplier_that_is_down_leaves_the_order_unknown_and_blocked(impl, db, crashed, policy):
    held, order = crashed()
    down = SupplierClient(dead_endpoint(), identity="dairy", timeout=0.5)

    got = impl.recover_once(db, owner="rescuer", supplier=down, policy=policy)

    assert (got["status"], got["generation"]) == ("BLOCKED", 2), f"no answer: BLOCKED, got {got}"
    assert get_order(db, order["id"])["status"] == "UNKNOWN", "the order may or may not exist"
    money = account(db)
    assert (money["reserved_cents"], money["spent_cents"]) == (VANILLA_CENTS, 0), (
        f"the reservation is kept until the order is known: {money}"
    )
    stored = outcome(db, held.work_id)
    assert (stored["generation"], stored["status"]) == (2, "BLOCKED")
    assert stored["result"].strip(), "a BLOCKED outcome says why in its result"


def test_nothing_eligible_is_idle(impl, db, supplier, policy):
    before = snapshot(db)
    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy)
    assert got == {"status": "IDLE"}, f"an empty shop: IDLE, got {got}"
    assert snapshot(db) == before, "an idle recovery changes nothing"


def test_a_live_holder_is_not_disturbed(impl, db, add_work, supplier, policy):
    work_id = add_work()
    live = impl.claim(db, "till", ttl=30)
    before = snapshot(db)
    got = impl.recover_once(db, owner="rescuer", supplier=supplier.client(), policy=policy)
    assert got == {"status": "IDLE"}, f"work under a live lease is not taken: IDLE, got {got}"
    assert snapshot(db) == before and lease(db, work_id)["worker_id"] == live.worker_id
