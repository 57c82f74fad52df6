"""``reconcile(db, supplier)``: settle uncertain orders of finished work by lookup alone;
never send."""

from __future__ import annotations

import time

import pytest
from learner_support import approved_order, snapshot
from shop_fixtures import REJECTED_SKU, VANILLA_CENTS, dead_endpoint

from lucyshop.approval import account, approve, execute, get_order, propose
from lucyshop.lab.given.orders import OPERATOR
from lucyshop.supplier import SupplierClient, ledger_orders


class LookupOnly:
    """A supplier client that fails the test if anything tries to send an order."""

    def __init__(self, client):
        self.client, self.identity, self.timeout = client, client.identity, client.timeout
        self.lookups = []

    def lookup(self, operation):
        self.lookups.append(operation)
        return self.client.lookup(operation)

    def order(self, operation, proposal):
        pytest.fail(f"reconcile sent order {operation}: it may only look orders up", pytrace=False)


@pytest.fixture
def uncertain(impl, db, add_work, policy):
    """``uncertain(client, drop=None)``: work whose one order ended UNKNOWN, finished BLOCKED by
    its holder (claimed at the real clock, within its lease); ``client`` is where it sent the
    order, ``drop`` a supplier that commits the order and loses the reply."""

    def make(client, *, drop=None):
        add_work()
        held = impl.claim(db, "till", ttl=30)
        order = approved_order(db, held, "dairy", policy)
        if drop is not None:
            drop.set_faults(drop_next=1)  # the supplier commits the order, then loses the reply
        sent = execute(db, held, order["id"], client, policy=policy)
        assert sent["status"] == "UNKNOWN", sent
        impl.finish(db, held, "BLOCKED", f"{order['operation']} is UNKNOWN")
        return held, get_order(db, order["id"])

    return make


def test_an_order_the_supplier_has_is_settled_by_lookup(impl, db, uncertain, supplier):
    _held, order = uncertain(supplier.client(), drop=supplier)
    assert len(ledger_orders(supplier.database)) == 1, (
        "the supplier committed before the reply was lost"
    )
    spy = LookupOnly(supplier.client())

    report = impl.reconcile(db, spy)

    assert get_order(db, order["id"])["status"] == "ACCEPTED", "the lookup found it: ACCEPTED"
    money = account(db)
    assert (money["reserved_cents"], money["spent_cents"]) == (0, VANILLA_CENTS), (
        f"the reservation moved to spent: {money}"
    )
    assert spy.lookups == [order["operation"]], f"looked up by its operation id: {spy.lookups}"
    assert len(report) == 1, f"one row per uncertain order, got {report}"
    row = report[0]
    assert (row["order_id"], row["operation"], row["before"], row["after"]) == (
        order["id"],
        order["operation"],
        "UNKNOWN",
        "ACCEPTED",
    ), f"the returned row says what changed: {row}"
    assert len(ledger_orders(supplier.database)) == 1, "still exactly one order at the supplier"


def test_a_rejected_order_releases_its_reservation(impl, db, add_work, policy, supplier):
    add_work()
    held = impl.claim(db, "till", ttl=30)
    oat = {"sku": REJECTED_SKU, "quantity": 2, "unit_cents": 300}
    order = propose(db, held, supplier="dairy", proposal=oat)
    approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=policy)
    supplier.set_faults(drop_next=1)
    execute(db, held, order["id"], supplier.client(), policy=policy)
    impl.finish(db, held, "BLOCKED", "the oat milk order is UNKNOWN")
    assert account(db)["reserved_cents"] == 600, "approval reserved 600 cents"

    report = impl.reconcile(db, LookupOnly(supplier.client()))

    assert get_order(db, order["id"])["status"] == "REJECTED"
    money = account(db)
    assert (money["reserved_cents"], money["spent_cents"]) == (0, 0), (
        f"REJECTED releases it: {money}"
    )
    assert report[0]["after"] == "REJECTED", f"the returned row: {report[0]}"


def test_an_operation_the_supplier_never_saw_stays_unknown(impl, db, uncertain, supplier):
    down = SupplierClient(dead_endpoint(), identity="dairy", timeout=0.5)
    _held, order = uncertain(down)  # the send never reached the supplier
    spy = LookupOnly(supplier.client())

    report = impl.reconcile(db, spy)

    assert get_order(db, order["id"])["status"] == "UNKNOWN", (
        "not found is not proof it will never arrive: the order stays UNKNOWN"
    )
    assert account(db)["reserved_cents"] == VANILLA_CENTS, "its reservation is kept"
    assert ledger_orders(supplier.database) == [], "reconcile placed nothing"
    assert len(report) == 1 and report[0]["order_id"] == order["id"], f"got {report}"
    assert report[0]["after"] == "UNKNOWN" and report[0]["note"], (
        f"the row says the supplier never saw it: {report[0]}"
    )


def test_a_supplier_that_is_down_leaves_it_unknown(impl, db, uncertain, supplier):
    _held, order = uncertain(supplier.client(), drop=supplier)
    down = LookupOnly(SupplierClient(dead_endpoint(), identity="dairy", timeout=0.5))

    report = impl.reconcile(db, down)

    assert get_order(db, order["id"])["status"] == "UNKNOWN", "no answer settles nothing"
    assert account(db)["reserved_cents"] == VANILLA_CENTS, "its reservation is kept"
    assert len(report) == 1 and report[0]["after"] == "UNKNOWN" and report[0]["note"], (
        f"got {report}"
    )


def test_the_report_tells_not_found_from_no_answer(impl, db, uncertain, supplier):
    never = SupplierClient(dead_endpoint(), identity="dairy", timeout=0.5)
    uncertain(never)
    not_found = impl.reconcile(db, LookupOnly(supplier.client()))
    no_answer = impl.reconcile(db, LookupOnly(never))
    assert not_found[0]["note"] != no_answer[0]["note"], (
        f"'never saw it' and 'did not answer' read differently: {not_found[0]['note']!r}"
    )


def test_running_work_is_left_to_its_holder(impl, db, add_work, policy, supplier):
    past = time.time() - 60
    add_work()
    held = impl.claim(db, "till", ttl=30, now=past)
    order = approved_order(db, held, "dairy", policy, now=past + 1)
    supplier.set_faults(drop_next=1)
    execute(db, held, order["id"], supplier.client(), policy=policy, now=past + 2)
    before = snapshot(db)
    report = impl.reconcile(db, LookupOnly(supplier.client()))
    assert report == [], f"only finished work is reconciled, got {report}"
    assert snapshot(db) == before, "an order of running work is its holder's to settle"


def test_nothing_uncertain_is_an_empty_report(impl, db, uncertain, supplier):
    uncertain(supplier.client(), drop=supplier)
    impl.reconcile(db, LookupOnly(supplier.client()))
    before = snapshot(db)
    assert impl.reconcile(db, LookupOnly(supplier.client())) == [], (
        "a settled order is not returned again"
    )
    assert snapshot(db) == before, "reconciling settled orders changes nothing"
