"""Fixtures for the runtime tests: a real shop file, a chapter-11 holder, a policy, a fake supplier,
and ``supplier``: here a supplier process of each test's own (the supplier's own tests stop it,
read its counters and fill its backlog), where spec/'s suites wipe one process between tests.

Chapter 13's ``claim`` is not part of the runtime, so these tests make work running and write
its lease row directly with SQL, as chapter 11 did.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from shop_fixtures import running_supplier

from lucyshop.approval import SpendingPolicy, account, open_shop
from lucyshop.lab.given.orders import POLICY
from lucyshop.lab.services.suppliers import RunningSupplier
from lucyshop.queue import WorkQueue

SUPPLIER = "dairy"
_sources = itertools.count(1)


@dataclass(frozen=True)
class Held:
    """What a chapter-11 worker holds: the work it runs and the id it runs it under."""

    work_id: int
    worker_id: str


@pytest.fixture
def supplier(tmp_path: Path) -> Iterator[RunningSupplier]:
    """A new supplier process (identity ``dairy``, its files in ``tmp_path``), ended after."""
    with running_supplier(tmp_path) as running:
        yield running


def work_id_of(queue: WorkQueue, source_id: str) -> int:
    """The id of admitted work, read back by its source id as chapter 13's ``enqueue`` does."""
    found = queue.store.connection.execute(
        "SELECT work_id FROM work WHERE source_id=?", (source_id,)
    ).fetchone()
    assert found is not None, f"no work was admitted for {source_id!r}"
    return found[0]


def make_running(
    db,
    queue,
    worker_id: str = "worker-1",
    *,
    ttl: float = 60.0,
    now: float | None = None,
    session_id: str = "session-1",
    text: str = "order vanilla for the weekend",
) -> Held:
    """Admit one piece of work, make it running under ``worker_id`` and write its lease row."""
    now = time.time() if now is None else now
    source_id = f"source-{next(_sources)}"
    status = queue.admit(source_id, session_id, text)
    assert status == "accepted", status
    work_id = work_id_of(queue, source_id)
    with db.immediate() as connection:
        connection.execute(
            "UPDATE work SET state = 'running', worker_id = ? WHERE work_id = ?",
            (worker_id, work_id),
        )
        connection.execute(
            "INSERT INTO assignment_leases(work_id, worker_id, expires) VALUES (?, ?, ?)",
            (work_id, worker_id, now + ttl),
        )
    return Held(work_id, worker_id)


def orders_table(db) -> list[dict[str, Any]]:
    return [dict(r) for r in db.execute("SELECT * FROM assistant_orders ORDER BY id")]


def read_back(db) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Everything the approval path may change: every order row and the account."""
    return orders_table(db), account(db)


class FakeSupplier:
    """An in-process supplier that answers from a dict and records every call it gets."""

    def __init__(
        self,
        identity: str = SUPPLIER,
        timeout: float = 1.0,
        *,
        order_error: BaseException | None = None,
        lookup_error: BaseException | None = None,
        status: str = "ACCEPTED",
        on_lookup: Callable[[str], None] | None = None,
    ) -> None:
        self.identity = identity
        self.timeout = timeout
        self.order_error = order_error
        self.lookup_error = lookup_error
        self.status = status
        self.on_lookup = on_lookup  # runs inside lookup: lets a test change the world meanwhile
        self.known: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    def receipt(self, operation: str, status: str | None = None) -> dict[str, Any]:
        return {
            "operation": operation,
            "status": status or self.status,
            "supplier": self.identity,
            "order_number": len(self.known) + 1,
        }

    def lookup(self, operation: str) -> dict | None:
        self.calls.append(("lookup", operation))
        if self.on_lookup is not None:
            self.on_lookup(operation)
        if self.lookup_error is not None:
            raise self.lookup_error
        return self.known.get(operation)

    def order(self, operation: str, proposal: dict) -> dict:
        self.calls.append(("order", operation))
        if self.order_error is not None:
            raise self.order_error
        self.known.setdefault(operation, self.receipt(operation))
        return self.known[operation]

    @property
    def orders_sent(self) -> int:
        return sum(1 for kind, _ in self.calls if kind == "order")


@pytest.fixture
def ch11_shop(tmp_path):
    """A fresh shop file at the chapter-11 schema: ``(db, queue)``, closed afterwards."""
    db, queue = open_shop(tmp_path / "shop.db")
    yield db, queue
    db.close()


@pytest.fixture(name="work_id_of")
def work_id_of_fixture() -> Callable[[WorkQueue, str], int]:
    """``work_id_of(queue, source_id)``: the id of admitted work, read back by its source id."""
    return work_id_of


@pytest.fixture
def hold(ch11_shop):
    """``hold(worker_id="worker-1", *, ttl=60, now=None) -> Held``: running work with its lease.

    The chapter-11 way: state, worker_id and the ``assignment_leases`` row written with SQL.
    """
    db, queue = ch11_shop

    def make(worker_id: str = "worker-1", **options: Any) -> Held:
        return make_running(db, queue, worker_id, **options)

    return make


@pytest.fixture
def snapshot(ch11_shop):
    """``snapshot()``: every order row and the account, to compare before and after a call."""
    db, _ = ch11_shop
    return lambda: read_back(db)


@pytest.fixture
def policy() -> SpendingPolicy:
    """The shop's own policy: its one operator, 10,000 cents in all, 5,000 without approval."""
    return POLICY


@pytest.fixture
def fake_supplier():
    """A fake supplier named ``dairy`` with a 1 s timeout that accepts every order."""
    return FakeSupplier()


@pytest.fixture
def make_supplier():
    """``make_supplier(identity=, timeout=, order_error=, lookup_error=, status=, on_lookup=)``."""
    return FakeSupplier
