"""The learner suite's helpers, which its test modules import (``from learner_support import
...``): reading a shop back, a shop in a state no chapter function made, and expecting a refusal.

A module of its own, not the conftest: the name ``conftest`` is shared by every conftest.py and
means whichever pytest loaded last. The fixtures stay in ``conftest.py``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from shop_fixtures import CHANGED_TABLES, VANILLA

from lucyshop.approval import SpendingPolicy, approve, propose
from lucyshop.lab.given.orders import OPERATOR

T = 1_000.0  # an injected clock, for tests of claim and assert_current alone
PAST = 60.0  # seconds back that ``expired_claim`` claims: its 30 s lease is long over


def work_id_of(db: sqlite3.Connection, source_id: str) -> int:
    """The work id of the assignment admitted as ``source_id``, read from the file."""
    row = db.execute("SELECT work_id FROM work WHERE source_id = ?", (source_id,)).fetchone()
    assert row is not None, f"no work admitted as {source_id!r}"
    return row[0]


def expired_claim(impl: Any, db: sqlite3.Connection, owner: str = "till") -> Any:
    """The chapter's ``claim`` a minute ago with a 30 s lease: a holder whose lease has already
    run out in real time, without a wait (time injected only through ``claim``'s ``now``)."""
    held = impl.claim(db, owner, ttl=30, now=time.time() - PAST)
    assert held is not None, "a pending item to claim"
    return held


def take_over(impl: Any, db: sqlite3.Connection, held: Any, owner: str = "night") -> Any:
    """Another claim of ``held``'s work at the moment its lease ends: the new holder is current
    (its 30 s lease starts at ``held.expires``, after now) and ``held`` is stale by generation."""
    taken = impl.claim(db, owner, ttl=30, now=held.expires)
    assert taken is not None and taken.work_id == held.work_id, (
        f"at the end of {held.worker_id}'s lease its work is taken over, got {taken}"
    )
    return taken


def rows(db: sqlite3.Connection, table: str, order: str = "rowid") -> list[dict]:
    """Every row of ``table`` as dicts: what the tests read back."""
    return [dict(r) for r in db.execute(f"SELECT * FROM {table} ORDER BY {order}")]


def lease(db: sqlite3.Connection, work_id: int) -> dict | None:
    row = db.execute("SELECT * FROM assignment_leases WHERE work_id = ?", (work_id,)).fetchone()
    return None if row is None else dict(row)


def work(db: sqlite3.Connection, work_id: int) -> dict:
    return dict(db.execute("SELECT * FROM work WHERE work_id = ?", (work_id,)).fetchone())


def snapshot(db: sqlite3.Connection) -> dict[str, list[dict]]:
    """The tables a claim, a fence or a recovery may change."""
    return {table: rows(db, table) for table in CHANGED_TABLES}


def finish_by_sql(db: sqlite3.Connection, work_id: int) -> None:
    """Move work to finished with the supplied schema alone (no chapter-13 function)."""
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (work_id,))


def approved_order(
    db: sqlite3.Connection,
    held: Any,
    supplier: str,
    policy: SpendingPolicy,
    *,
    now: float | None = None,
) -> dict[str, Any]:
    """Propose six vanilla tubs for the held work and record the operator's approval."""
    order = propose(db, held, supplier=supplier, proposal=VANILLA, now=now)
    return approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=policy, now=now)


@contextmanager
def refuses(kind: type[BaseException], what: str) -> Iterator[None]:
    """Expect ``kind`` from the block; on anything else that returns, fail saying ``what``.

    Other exceptions (a ``NotStarted`` included) propagate unchanged.
    """
    try:
        yield
    except kind:
        return
    pytest.fail(f"{what} should raise {kind.__name__}", pytrace=False)
