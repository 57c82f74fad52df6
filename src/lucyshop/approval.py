"""Chapter 11's approval path: proposals, operator approval, one spending account, and ``execute``.

An agent may *propose* an order; only an operator on the policy's allowlist may *approve* it,
by the exact digest of what will be sent, and approval reserves the money. ``execute`` is the
only code that talks to the supplier, and it re-checks every authority in one transaction
before it marks the order SENDING. The holder check compares ``held.worker_id`` against the
work row and the lease. Chapter 13 changes nothing here: it makes ``worker_id`` carry a
generation (``owner#generation``), and this unchanged comparison becomes a fence.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lucyshop import proposal as proposals
from lucyshop import validate
from lucyshop.queue import QUEUE_MIGRATIONS, WorkQueue
from lucyshop.store import ShopConnection, connect

DEFAULT_LIMIT_CENTS = 100_000
STATUSES = ("DRAFT", "APPROVED", "SENDING", "UNKNOWN", "ACCEPTED", "REJECTED", "REVOKED")
CONCLUSIVE = ("ACCEPTED", "REJECTED")
UNCERTAIN = ("SENDING", "UNKNOWN")

APPROVAL_MIGRATIONS = {
    1: (
        """CREATE TABLE assignment_leases(
            work_id   INTEGER PRIMARY KEY REFERENCES work(work_id),
            worker_id TEXT NOT NULL,
            expires   REAL NOT NULL
        )""",
        # One account. The CHECKs make overspending impossible even for a buggy caller.
        """CREATE TABLE spending_account(
            account_id     INTEGER PRIMARY KEY CHECK (account_id = 1),
            limit_cents    INTEGER NOT NULL CHECK (limit_cents >= 0),
            reserved_cents INTEGER NOT NULL DEFAULT 0 CHECK (reserved_cents >= 0),
            spent_cents    INTEGER NOT NULL DEFAULT 0 CHECK (spent_cents >= 0),
            CHECK (reserved_cents + spent_cents <= limit_cents)
        )""",
        f"INSERT INTO spending_account(account_id, limit_cents) VALUES (1, {DEFAULT_LIMIT_CENTS})",
        f"""CREATE TABLE assistant_orders(
            id               INTEGER PRIMARY KEY AUTOINCREMENT,
            work_id          INTEGER NOT NULL REFERENCES work(work_id),
            operation        TEXT NOT NULL UNIQUE,
            supplier         TEXT NOT NULL,
            proposal         TEXT NOT NULL,
            digest           TEXT NOT NULL,
            amount_cents     INTEGER NOT NULL CHECK (amount_cents > 0),
            status           TEXT NOT NULL DEFAULT 'DRAFT' CHECK (status IN {STATUSES}),
            approved_by      TEXT,
            approval_expires REAL,
            revoked_by       TEXT,
            receipt          TEXT,
            created          REAL NOT NULL,
            updated          REAL NOT NULL
        )""",
        "CREATE INDEX orders_by_work ON assistant_orders(work_id)",
        # Legal moves only. UNKNOWN -> SENDING is a retry after a lookup found nothing.
        """CREATE TRIGGER order_status_moves BEFORE UPDATE OF status ON assistant_orders
           WHEN NOT (OLD.status = NEW.status
             OR (OLD.status = 'DRAFT'    AND NEW.status IN ('APPROVED', 'REVOKED'))
             OR (OLD.status = 'APPROVED' AND NEW.status IN ('SENDING', 'REVOKED'))
             OR (OLD.status = 'SENDING'  AND NEW.status IN ('UNKNOWN', 'ACCEPTED', 'REJECTED'))
             OR (OLD.status = 'UNKNOWN'  AND NEW.status IN ('SENDING', 'ACCEPTED', 'REJECTED')))
           BEGIN SELECT RAISE(ABORT, 'illegal order status move'); END""",
    ),
}


class Held(Protocol):
    """Whatever a worker holds: chapter 11 needs only these two fields."""

    work_id: int
    worker_id: str


class Supplier(Protocol):
    """What ``execute`` and the chapter's ``reconcile`` need of a supplier:
    ``lucyshop.supplier.SupplierClient`` is one, and a test may pass any object with these.

    ``identity`` is the supplier an order names (``dairy``); ``timeout`` the seconds one
    request may take. Both methods raise ``SupplierUnavailable`` when no trustworthy answer
    came (a timeout, a refused connection, a reply that is not this supplier's receipt): then
    the order's fate is unknown, not failed.
    """

    identity: str
    timeout: float

    def lookup(self, operation: str) -> dict | None:
        """The supplier's receipt for ``operation``, or None if it has never seen it."""
        ...

    def order(self, operation: str, proposal: dict) -> dict:
        """Place the order (repeating an ``operation`` places nothing new) and return its
        receipt: ``status`` is ACCEPTED or REJECTED."""
        ...


@dataclass(frozen=True)
class SpendingPolicy:
    """Who may approve, the account's ceiling, and the largest order the agent may place."""

    operators: frozenset[str]
    total_cents: int
    automatic_order_cents: int

    def __post_init__(self) -> None:
        if isinstance(self.operators, str):
            raise ValueError("operators is a collection of names, not one string")
        object.__setattr__(self, "operators", frozenset(self.operators))
        if not self.operators or not all(isinstance(o, str) and o for o in self.operators):
            raise ValueError("a policy needs at least one operator name")
        for name in ("total_cents", "automatic_order_cents"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number of cents >= 0: {value!r}")


def open_shop(path: str | Path) -> tuple[ShopConnection, WorkQueue]:
    """Open (creating if needed) a shop file at the chapter-11 schema: the shop and its queue."""
    db = connect(path)
    db.migrate("queue", QUEUE_MIGRATIONS)
    db.migrate("approval", APPROVAL_MIGRATIONS)
    return db, WorkQueue(db)


def require_holder(db: sqlite3.Connection, held: Held, now: float) -> float:
    """Chapter 11's check: ``held.worker_id`` runs the work and holds an unexpired lease.

    Returns the seconds of lease left. Call it inside the transaction whose write it guards.
    """
    row = db.execute(
        "SELECT w.state, w.worker_id, l.worker_id AS lease_worker, l.expires"
        " FROM work w LEFT JOIN assignment_leases l ON l.work_id = w.work_id"
        " WHERE w.work_id = ?",
        (held.work_id,),
    ).fetchone()
    if row is None:
        raise PermissionError(f"work {held.work_id} does not exist")
    if row["state"] != "running" or row["worker_id"] != held.worker_id:
        raise PermissionError(
            f"work {held.work_id} is {row['state']} by {row['worker_id']!r}, not held by "
            f"{held.worker_id!r}"
        )
    if row["lease_worker"] != held.worker_id:
        raise PermissionError(
            f"the lease on work {held.work_id} belongs to {row['lease_worker']!r}"
        )
    if row["expires"] <= now:
        raise PermissionError(f"the lease of {held.worker_id!r} on work {held.work_id} has expired")
    return row["expires"] - now


def account(db: sqlite3.Connection) -> dict[str, int]:
    row = db.execute(
        "SELECT limit_cents, reserved_cents, spent_cents FROM spending_account"
    ).fetchone()
    return dict(row)


def get_order(db: sqlite3.Connection, order_id: int) -> dict[str, Any]:
    validate.row_id(order_id, "order_id")
    row = db.execute("SELECT * FROM assistant_orders WHERE id = ?", (order_id,)).fetchone()
    if row is None:
        raise ValueError(f"there is no order {order_id!r}")
    return dict(row)


def orders_for(db: sqlite3.Connection, work_id: int) -> list[dict[str, Any]]:
    """Every order row of the work item ``work_id``, oldest first (by ``id``): each a
    dict of ``assistant_orders``' columns (``status``, ``operation``, ``amount_cents``, ...).
    Empty when the work has no order; it reads only, so any connection will do."""
    rows = db.execute("SELECT * FROM assistant_orders WHERE work_id = ? ORDER BY id", (work_id,))
    return [dict(r) for r in rows]


def propose(
    db: sqlite3.Connection, held: Held, *, supplier: str, proposal: dict, now: float | None = None
) -> dict[str, Any]:
    """Record a DRAFT order for the held work; proposing the same order again returns it."""
    now = validate.clock(now)
    text = proposals.canonical(proposal)
    validate.label(supplier, "an order's supplier identity")
    operation = proposals.operation_id(held.work_id, supplier, proposal)
    with db.immediate():
        require_holder(db, held, now)
        db.execute(
            "INSERT INTO assistant_orders(work_id, operation, supplier, proposal, digest,"
            " amount_cents, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(operation) DO NOTHING",
            (
                held.work_id,
                operation,
                supplier,
                text,
                proposals.digest(proposal),
                proposals.amount_cents(proposal),
                now,
                now,
            ),
        )
        row = db.execute(
            "SELECT * FROM assistant_orders WHERE operation = ?", (operation,)
        ).fetchone()
    return dict(row)


def approve(
    db: sqlite3.Connection,
    order_id: int,
    *,
    actor: str,
    digest: str,
    policy: SpendingPolicy,
    ttl: float = 600.0,
    now: float | None = None,
) -> dict[str, Any]:
    """An operator approves exactly this proposal (by digest) until ``now + ttl``;
    reserves the money."""
    now = validate.clock(now)
    validate.seconds(ttl, "an approval's ttl", positive=True, most=86_400)
    validate.string(actor, "actor")
    with db.immediate():
        order = get_order(db, order_id)
        if actor not in policy.operators:
            raise PermissionError(f"{actor!r} is not an operator and cannot approve orders")
        if order["status"] != "DRAFT":
            raise PermissionError(
                f"order {order_id} is {order['status']}, only a DRAFT can be approved"
            )
        if digest != order["digest"]:
            raise PermissionError(
                f"digest does not match order {order_id}: approve what will be sent"
            )
        _within_ceiling(db, order["amount_cents"], policy, extra=order["amount_cents"])
        db.execute(
            "UPDATE assistant_orders SET status = 'APPROVED', approved_by = ?,"
            " approval_expires = ?,"
            " updated = ? WHERE id = ?",
            (actor, now + ttl, now, order_id),
        )
        db.execute(
            "UPDATE spending_account SET reserved_cents = reserved_cents + ?",
            (order["amount_cents"],),
        )
        return get_order(db, order_id)


def revoke(
    db: sqlite3.Connection,
    order_id: int,
    *,
    actor: str,
    policy: SpendingPolicy,
    now: float | None = None,
) -> dict[str, Any]:
    """Withdraw a DRAFT or APPROVED order; an approved one gives its reservation back."""
    now = validate.clock(now)
    validate.string(actor, "actor")
    with db.immediate():
        order = get_order(db, order_id)
        if actor not in policy.operators:
            raise PermissionError(f"{actor!r} is not an operator and cannot revoke orders")
        if order["status"] not in ("DRAFT", "APPROVED"):
            raise PermissionError(
                f"order {order_id} is {order['status']}: it may already be at the supplier"
            )
        if order["status"] == "APPROVED":
            db.execute(
                "UPDATE spending_account SET reserved_cents = reserved_cents - ?",
                (order["amount_cents"],),
            )
        db.execute(
            "UPDATE assistant_orders SET status = 'REVOKED', revoked_by = ?, updated = ?"
            " WHERE id = ?",
            (actor, now, order_id),
        )
        return get_order(db, order_id)


def record_receipt(
    db: sqlite3.Connection, order_id: int, receipt: dict, *, now: float | None = None
) -> dict[str, Any]:
    """Record the supplier's conclusive answer for an order that was sent, and settle the money.

    Needs no holder: a receipt is a fact about the world, and whoever learns it should write
    it down. ACCEPTED moves the reservation to spent; REJECTED releases it. Recording the same
    answer twice changes nothing; a contradicting answer is refused.
    """
    now = validate.clock(now)
    with db.immediate():
        order = get_order(db, order_id)
        status = _check_receipt(order, receipt)
        if order["status"] in CONCLUSIVE:
            if order["status"] != status:
                raise RuntimeError(
                    f"order {order_id} is {order['status']}; the supplier now says {status}"
                )
            return order
        if order["status"] not in UNCERTAIN:
            raise PermissionError(f"order {order_id} is {order['status']}; it was never sent")
        spent = order["amount_cents"] if status == "ACCEPTED" else 0
        db.execute(
            "UPDATE spending_account SET reserved_cents = reserved_cents - ?,"
            " spent_cents = spent_cents + ?",
            (order["amount_cents"], spent),
        )
        db.execute(
            "UPDATE assistant_orders SET status = ?, receipt = ?, updated = ? WHERE id = ?",
            (status, json.dumps(receipt, sort_keys=True), now, order_id),
        )
        return get_order(db, order_id)


def execute(
    db: sqlite3.Connection,
    held: Held,
    order_id: int,
    supplier: Supplier,
    *,
    policy: SpendingPolicy,
    now: float | None = None,
) -> dict[str, Any]:
    """Send an approved order, at most once in effect; return the receipt dict.

    Order of checks: the order belongs to the held work; ``held`` is the current holder; the
    order targets this supplier; a conclusive order just returns its receipt; a SENDING or
    UNKNOWN order is looked up by its operation id first (it may already be there). Then one
    transaction re-checks every authority and marks SENDING, commits, and only then sends.
    A transport failure leaves the order UNKNOWN with its reservation kept. Without an
    injected ``now``, the clock is read again under the write lock: a slow lookup or a wait
    for the lock must not let a send through on a reading taken before it.
    """
    injected = now is not None
    now = validate.clock(now)
    order = get_order(db, order_id)
    if order["work_id"] != held.work_id:
        raise PermissionError(
            f"order {order_id} belongs to work {order['work_id']}, not {held.work_id}"
        )
    require_holder(db, held, now)
    if order["supplier"] != supplier.identity:
        raise PermissionError(
            f"order {order_id} is for {order['supplier']!r}, not {supplier.identity!r}"
        )
    if order["status"] in CONCLUSIVE:
        return json.loads(order["receipt"])
    if order["status"] in UNCERTAIN:
        try:
            found = supplier.lookup(order["operation"])
        except ConnectionError:
            return _unknown(db, order, "the supplier did not answer the lookup", now)
        if found is not None:
            record_receipt(db, order_id, found)
            return found
    with db.immediate():
        now = now if injected else time.time()
        order = get_order(db, order_id)
        left = require_holder(db, held, now)
        if order["status"] not in ("APPROVED", *UNCERTAIN):
            raise PermissionError(
                f"order {order_id} is {order['status']}, not approved for sending"
            )
        if order["revoked_by"] is not None or order["approval_expires"] <= now:
            raise PermissionError(f"the approval of order {order_id} has expired")
        _within_ceiling(db, order["amount_cents"], policy, extra=0)
        if account(db)["reserved_cents"] < order["amount_cents"]:
            raise PermissionError(
                f"the reservation for order {order_id} is missing from the account"
            )
        if not supplier.timeout < left:
            raise PermissionError(
                f"the supplier timeout ({supplier.timeout:g}s) is not shorter than the lease left "
                f"({left:.2f}s)"
            )
        db.execute(
            "UPDATE assistant_orders SET status = 'SENDING', updated = ? WHERE id = ?",
            (now, order_id),
        )
    try:
        receipt = supplier.order(order["operation"], json.loads(order["proposal"]))
    except ConnectionError:
        return _unknown(db, order, "the supplier did not confirm the order", now)
    record_receipt(db, order_id, receipt)
    return receipt


def _within_ceiling(
    db: sqlite3.Connection, amount: int, policy: SpendingPolicy, *, extra: int
) -> None:
    if amount > policy.automatic_order_cents:
        raise PermissionError(
            f"{amount} cents is above the automatic order ceiling of {policy.automatic_order_cents}"
        )
    money = account(db)
    committed = money["reserved_cents"] + money["spent_cents"] + extra
    if committed > min(policy.total_cents, money["limit_cents"]):
        raise PermissionError(
            f"the account ceiling would be exceeded: {committed} of "
            f"{min(policy.total_cents, money['limit_cents'])} cents"
        )


def _unknown(db: sqlite3.Connection, order: dict, why: str, now: float) -> dict[str, Any]:
    with db.immediate():
        db.execute(
            "UPDATE assistant_orders SET status = 'UNKNOWN', updated = ? WHERE id = ?"
            " AND status IN ('SENDING', 'UNKNOWN')",
            (now, order["id"]),
        )
    return {"operation": order["operation"], "status": "UNKNOWN", "reason": why}


def _check_receipt(order: dict, receipt: Any) -> str:
    if not isinstance(receipt, dict):
        raise ValueError(f"a receipt is a JSON object, not {type(receipt).__name__}")
    if receipt.get("operation") != order["operation"]:
        raise ValueError(
            f"the receipt is for {receipt.get('operation')!r}, not {order['operation']!r}"
        )
    status = receipt.get("status")
    if status not in CONCLUSIVE:
        raise ValueError(f"a receipt's status is ACCEPTED or REJECTED, not {status!r}")
    return status
