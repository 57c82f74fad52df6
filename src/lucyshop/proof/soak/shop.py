"""The shop a soak runs in: the order each assignment asks for, the operator's policy, and the
witnesses (history tables and triggers) that the invariants read back afterwards."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from lucyshop import approval
from lucyshop.lab.given.orders import OPERATOR

SUPPLIER = "dairy"
SKUS = (
    "vanilla-tub",
    "chocolate-tub",
    "strawberry-tub",
    "pistachio-tub",
    "hazelnut-tub",
    "mango-tub",
    "lemon-tub",
    "durian-tub",
)
# The supplier answers REJECTED for this one: the other conclusive answer.
REJECTED_SKU = "durian-tub"
MAX_ORDER_CENTS = 5 * 250
NOW_SQL = "((julianday('now') - 2440587.5) * 86400.0)"


def proposal_for(work_id: int) -> dict[str, Any]:
    """The one small order an assignment asks for, derived from its work id
    (so every retry agrees)."""
    return {
        "sku": SKUS[work_id % len(SKUS)],
        "quantity": 1 + work_id % 5,
        "unit_cents": 100 + 25 * (work_id % 7),
    }


def policy_for(items: int) -> approval.SpendingPolicy:
    """An operator allowlist and a ceiling large enough that every assignment's order fits."""
    return approval.SpendingPolicy(
        frozenset({OPERATOR}),
        total_cents=items * MAX_ORDER_CENTS,
        automatic_order_cents=MAX_ORDER_CENTS,
    )


HISTORY = (
    """CREATE TABLE IF NOT EXISTS soak_lease_history(
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        work_id    INTEGER NOT NULL,
        generation INTEGER,
        worker_id  TEXT,
        expires    REAL,
        at         REAL NOT NULL
    )""",
    # Every lease row a claim (or anything else) writes, with the time inside its transaction.
    *(
        f"""CREATE TRIGGER IF NOT EXISTS soak_lease_{event.lower()} AFTER {event}"""
        f""" ON assignment_leases
        BEGIN INSERT INTO soak_lease_history(work_id, generation, worker_id, expires, at)
              VALUES (NEW.work_id, NEW.generation, NEW.worker_id, NEW.expires, {NOW_SQL}); END"""
        for event in ("INSERT", "UPDATE")
    ),
    """CREATE TABLE IF NOT EXISTS soak_writes(
        id                 INTEGER PRIMARY KEY AUTOINCREMENT,
        kind               TEXT NOT NULL,
        work_id            INTEGER NOT NULL,
        row_ref            INTEGER,
        written_generation INTEGER,
        lease_generation   INTEGER,
        work_state         TEXT,
        at                 REAL NOT NULL
    )""",
    # Inside the writer's own transaction: which generation held the lease when this row went in.
    *(
        f"""CREATE TRIGGER IF NOT EXISTS soak_{kind}_audit AFTER INSERT ON {table}
        BEGIN INSERT INTO soak_writes(kind, work_id, row_ref, written_generation, lease_generation,
                                      work_state, at)
              VALUES ('{kind}', NEW.work_id, {ref}, NEW.generation,
                      (SELECT generation FROM assignment_leases WHERE work_id = NEW.work_id),
                      (SELECT state FROM work WHERE work_id = NEW.work_id), {NOW_SQL}); END"""
        for kind, table, ref in (
            ("transcript", "transcript", "NEW.seq"),
            ("outcome", "outcomes", "NULL"),
        )
    ),
)


def install_history(db: sqlite3.Connection, items: int) -> None:
    """Add the soak's witnesses to a fresh shop and open its account wide enough for every order."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in HISTORY:
            db.execute(statement)
        db.execute("UPDATE spending_account SET limit_cents = ?", (items * MAX_ORDER_CENTS,))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def patient(db: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Let ``db`` wait up to ``busy_timeout_ms`` for SQLite's write lock: for the kit's
    ``immediate`` (which keeps its budget on the connection) and for a plain ``BEGIN``."""
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if hasattr(db, "busy_timeout_ms"):
        db.busy_timeout_ms = int(busy_timeout_ms)


def read_only(path: str | Path) -> sqlite3.Connection:
    """A read-only connection whose rows read by column name."""
    db = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, timeout=5)
    db.row_factory = sqlite3.Row
    return db
