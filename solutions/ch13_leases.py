"""Chapter 13, the reference: leases, generations, fences and recovery from records.

This is the complete twin of ``learner/ch13_leases.py``. Every function here has the same
signature and docstring as its stub there (a test keeps them in step). Part B follows the
chapter's printed code: its signatures, its return values, its queries. What goes further is
marked *beyond the book* where it is: the claim's refusal of hostile input and its index for
long queues, and the kit's own ``reconcile`` and ``cancel``. The checkpoint and the spec run
either file; when they run a student's file, this one is blocked.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop import validate
from lucyshop.approval import (
    CONCLUSIVE,
    SpendingPolicy,
    Supplier,
    execute,
    open_shop,
    record_receipt,
)
from lucyshop.queue import WorkQueue

# ---------------------------------------------------------------- Part A: slow or dead?


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least ``q`` percent of samples at or
    below it.

    p50, p90 and p100 of 40 samples are the 20th, 36th and 40th smallest. Empty input, a
    ``q`` outside [0, 100], or a sample that is NaN, infinite or negative raise ValueError.
    """
    ordered = sorted(_durations(values))
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 100:
        raise ValueError(f"q is a percentage from 0 to 100: {q!r}")
    rank = max(1, math.ceil(q * len(ordered) / 100))
    return ordered[rank - 1]


def false_expiry_share(turns: Sequence[float], lease: float) -> float:
    """Share of turns that outlive ``lease`` (strictly longer):
    how often a live holder loses its work.

    Every turn and the lease are finite seconds >= 0: NaN or infinity is a ValueError.
    """
    observed = _durations(turns)
    lease = _seconds(lease, "lease")
    return sum(1 for turn in observed if turn > lease) / len(observed)


def shortest_lease(turns: Sequence[float], target: float) -> float:
    """The smallest observed turn whose false-expiry share is at most ``target``
    (a share in [0, 1]).

    Only observed turns are candidates: a lease between two observations is a guess the
    data cannot support. ValueError when no observed turn meets the target.
    """
    observed = _durations(turns)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 <= target <= 1:
        raise ValueError(f"target is a share from 0 to 1: {target!r}")
    for candidate in sorted(set(observed)):
        if false_expiry_share(observed, candidate) <= target:
            return candidate
    raise ValueError(f"no observed turn keeps false expiry at or below {target}")


def detection_delay(lease: float, turn: float, scan: float) -> float:
    """Expected seconds from a crash to its takeover: ``lease - turn/2 + scan/2``.

    The crash is uniform within a turn of length ``turn`` that began when the lease was
    taken, and the replacement polls every ``scan`` seconds. A turn longer than the lease is
    refused: then the lease would expire under a live holder and the formula does not apply.
    Each argument is finite seconds >= 0 (a lease above 0): NaN or infinity is a ValueError.
    """
    lease = _seconds(lease, "lease")
    turn = _seconds(turn, "turn")
    scan = _seconds(scan, "scan")
    if lease == 0:
        raise ValueError("a lease must be longer than 0 seconds")
    if turn > lease:
        raise ValueError(f"a turn of {turn}s outlives a lease of {lease}s: it would expire falsely")
    return lease - turn / 2 + scan / 2


def outlive_curve(turns: Sequence[float], leases: Iterable[float]) -> list[tuple[float, float]]:
    """``(lease, share of turns that outlive it)`` for each lease, in the order given:
    the plot's points."""
    observed = _durations(turns)
    return [(float(lease), false_expiry_share(observed, lease)) for lease in leases]


def fenced(writer_generation: int, current_generation: int) -> bool:
    """True when a writer holding ``writer_generation`` must be refused because the lease moved on.

    Generations only grow; a writer *ahead* of the current generation means the records are
    corrupt, so that is a ValueError rather than an answer.
    """
    for name, value in (
        ("writer_generation", writer_generation),
        ("current_generation", current_generation),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} is a whole number from 1: {value!r}")
    if writer_generation > current_generation:
        raise ValueError(
            f"generation {writer_generation} is ahead of the current {current_generation}"
        )
    return writer_generation < current_generation


# ---------------------------------------------------------------- Part B: durable claims

LEASE_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # Which acquisition holds the lease. Each claim writes one more, so a reused owner
        # label still names a new execution.
        "ALTER TABLE assignment_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 1",
        (
            "CREATE TABLE transcript ("
            " seq INTEGER PRIMARY KEY AUTOINCREMENT, work_id INTEGER NOT NULL,"
            " generation INTEGER NOT NULL, message TEXT NOT NULL)"
        ),
        (
            "CREATE TABLE outcomes ("
            " work_id INTEGER PRIMARY KEY, generation INTEGER NOT NULL,"
            " status TEXT NOT NULL CHECK (status IN ('DONE', 'BLOCKED', 'CANCELED')),"
            " result TEXT NOT NULL)"
        ),
    ),
    # Beyond the book (13b, "A claim at any queue length"): open work in age order, so that a
    # claim walks from the oldest open item and stops at the first eligible one. SQLite uses a
    # partial index only when the query repeats its condition, here `state != 'finished'`.
    2: ("CREATE INDEX work_open ON work(work_id) WHERE state != 'finished'",),
}

STATUSES = ("DONE", "BLOCKED", "CANCELED")


def open_worker_shop(path: str | Path) -> tuple[sqlite3.Connection, WorkQueue]:
    """Chapter 11's shop and queue, migrated to leases that carry a generation."""
    db, queue = open_shop(path)
    db.migrate("leases", LEASE_MIGRATIONS)
    return db, queue


@dataclass(frozen=True)
class Claim:
    """One acquisition of one work item: what a worker shows before every write it makes."""

    work_id: int
    session_id: str
    text: str
    owner: str
    generation: int
    expires: float

    @property
    def worker_id(self) -> str:
        """``owner#generation``: the value chapters 8 and 11 already compare, so their checks
        fence by generation unchanged."""
        return f"{self.owner}#{self.generation}"


def enqueue(queue: WorkQueue, source_id: str, session_id: str, text: str) -> int:
    """Admit one assignment through chapter 8's queue and return its work id.

    A retried delivery (``duplicate``) returns the same id; any other answer is a ValueError.
    """
    if queue.admit(source_id, session_id, text) not in {"accepted", "duplicate"}:
        raise ValueError(f"work {source_id!r} was not admitted")
    found = queue.store.connection.execute(
        "SELECT work_id FROM work WHERE source_id = ?", (source_id,)
    ).fetchone()
    return found[0]


def claim(
    db: sqlite3.Connection, owner: str, *, ttl: float = 90, now: float | None = None
) -> Claim | None:
    """In one immediate transaction, take the oldest item nobody may hold any longer (still
    waiting, or whose holder's lease ran out), skipping any session whose other work has a
    live holder; or return None.

    The claim writes generation + 1, so an item's first claim is generation 1. ``owner`` is a
    non-empty label without ``#``; ``ttl`` is finite, above 0 and at most 3600. Anything else
    is a ValueError.
    """
    _refuse_hostile(owner, ttl, now)
    now = time.time() if now is None else now
    if not owner or "#" in owner or not math.isfinite(ttl) or not 0 < ttl <= 3600:
        raise ValueError("a claim needs an owner label without '#' and a lease of (0, 3600] s")
    with db.immediate() as connection:
        # The open work in age order (work_open), stopping at the first eligible item: no
        # sort, so the cost does not grow with the queue (beyond the book).
        row = connection.execute(
            "SELECT w.work_id, w.session_id, w.text, w.state, coalesce(l.generation, 0)"
            " FROM work w INDEXED BY work_open"
            " LEFT JOIN assignment_leases l ON l.work_id = w.work_id"
            " WHERE w.state != 'finished'"
            " AND (w.state = 'pending' OR (w.state = 'running' AND l.expires <= :now))"
            " AND NOT EXISTS (SELECT 1 FROM work o JOIN assignment_leases ol"
            "   ON ol.work_id = o.work_id WHERE o.session_id = w.session_id"
            "   AND o.state = 'running' AND ol.expires > :now)"
            " ORDER BY w.work_id LIMIT 1",
            {"now": now},
        ).fetchone()
        if row is None:
            return None
        work_id, session_id, text, state, before = row
        held = Claim(work_id, session_id, text, owner, before + 1, now + ttl)
        if state == "pending":
            connection.execute(
                "UPDATE work SET state = 'running', worker_id = ? WHERE work_id = ?",
                (held.worker_id, work_id),
            )
        else:
            connection.execute(
                "UPDATE work SET worker_id = ? WHERE work_id = ?", (held.worker_id, work_id)
            )
        connection.execute(
            "INSERT INTO assignment_leases (work_id, worker_id, expires, generation)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (work_id) DO UPDATE SET"
            " worker_id = excluded.worker_id, expires = excluded.expires,"
            " generation = excluded.generation",
            (work_id, held.worker_id, held.expires, held.generation),
        )
    return held


def assert_current(connection: sqlite3.Connection, held: Claim, now: float | None = None) -> float:
    """Return the lease's expiry if ``held`` is still the current, unexpired holder of its
    work; otherwise raise PermissionError.

    It compares the work's state, its worker id (owner and generation), the lease's
    generation and the expiry. Call it inside the transaction of the write it guards.
    """
    now = time.time() if now is None else now
    row = connection.execute(
        "SELECT w.state, w.worker_id, l.generation, l.expires FROM work w"
        " JOIN assignment_leases l ON l.work_id = w.work_id WHERE w.work_id = ?",
        (held.work_id,),
    ).fetchone()
    if row is None:
        raise PermissionError(f"work {held.work_id} has no lease")
    state, worker_id, generation, expires = row
    if state != "running":
        raise PermissionError(f"work {held.work_id} is {state}, not running")
    if generation != held.generation:
        raise PermissionError(
            f"generation {held.generation} of work {held.work_id} is superseded by {generation}"
        )
    if worker_id != held.worker_id:
        raise PermissionError(
            f"work {held.work_id} is held by {worker_id!r}, not {held.worker_id!r}"
        )
    if expires <= now:
        raise PermissionError(f"the lease of {held.worker_id} on work {held.work_id} has expired")
    return expires


def observe(db: sqlite3.Connection, held: Claim, message: dict[str, Any]) -> None:
    """Append one transcript message for the held work, recorded at the writer's generation.

    The holder check and the insert share one transaction, so a refused writer leaves no row.
    """
    with db.immediate() as connection:
        assert_current(connection, held)
        connection.execute(
            "INSERT INTO transcript (work_id, generation, message) VALUES (?, ?, ?)",
            (held.work_id, held.generation, json.dumps(message, allow_nan=False)),
        )


def finish(db: sqlite3.Connection, held: Claim, status: str, result: str) -> None:
    """End the held work with its outcome (DONE, BLOCKED or CANCELED) and a result text.

    Only the current holder may: the check, the state move and the outcome row are one
    transaction, so a stale or repeated finish changes nothing.
    """
    if status not in STATUSES:
        raise ValueError(f"status is one of {', '.join(STATUSES)}, not {status!r}")
    with db.immediate() as connection:
        assert_current(connection, held)
        connection.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (held.work_id,))
        connection.execute(
            "INSERT INTO outcomes (work_id, generation, status, result) VALUES (?, ?, ?, ?)",
            (held.work_id, held.generation, status, result),
        )


def recover_once(
    db: sqlite3.Connection,
    *,
    owner: str,
    supplier: Supplier,
    policy: SpendingPolicy,
    ttl: float = 30,
) -> dict[str, Any]:
    """Claim expired or waiting work and continue only what its records already hold.

    No model takes part. The work's APPROVED, SENDING and UNKNOWN orders go through chapter
    11's ``execute``, which checks every authority again and looks an uncertain order up
    before any send. Returns ``{"status": "IDLE"}`` when nothing is eligible, else
    ``{"status", "work", "generation"}``: DONE when every order ended conclusively, BLOCKED
    when there was none to continue or one is still uncertain.
    """
    held = claim(db, owner, ttl=ttl)
    if held is None:
        return {"status": "IDLE"}
    orders = [
        row[0]
        for row in db.connection.execute(
            "SELECT id FROM assistant_orders WHERE work_id = ?"
            " AND status IN ('APPROVED', 'SENDING', 'UNKNOWN') ORDER BY created, id",
            (held.work_id,),
        )
    ]
    if not orders:
        status, result = "BLOCKED", "Nothing approved is recorded to continue; a model turn must."
    else:
        receipts = [execute(db, held, order, supplier, policy=policy) for order in orders]
        answers = [receipt.get("status") for receipt in receipts]
        if all(answer in CONCLUSIVE for answer in answers):
            said = ", ".join(f"{o}: {a}" for o, a in zip(orders, answers, strict=True))
            status, result = "DONE", f"Continued the recorded orders ({said})."
        else:
            status, result = "BLOCKED", "An order is still uncertain: look it up, never resend."
    finish(db, held, status, result)
    return {"status": status, "work": held.work_id, "generation": held.generation}


def reconcile(db: sqlite3.Connection, supplier: Supplier) -> list[dict]:
    """Settle the SENDING and UNKNOWN orders of finished work by looking them up; never send.

    The kit's own function: the chapter describes reconciliation but prints no code for it.

    A found receipt is recorded (ACCEPTED spends the reservation, REJECTED releases it). An
    operation the supplier never saw, or a supplier that does not answer, leaves the order as
    it was (SENDING stays SENDING, UNKNOWN stays UNKNOWN) with its reservation kept, and the
    returned row's ``note`` says which.
    """
    rows = db.execute(
        "SELECT o.id, o.operation, o.status FROM assistant_orders o JOIN work w"
        " ON w.work_id = o.work_id WHERE w.state = 'finished'"
        " AND o.status IN ('SENDING', 'UNKNOWN')"
        " AND o.supplier = ? ORDER BY o.id",
        (supplier.identity,),
    ).fetchall()
    settlements = []
    for row in rows:
        entry = {
            "order_id": row["id"],
            "operation": row["operation"],
            "before": row["status"],
        }
        try:
            found = supplier.lookup(row["operation"])
        except ConnectionError as error:
            settlements.append(
                entry | {"after": row["status"], "note": f"supplier unavailable: {error}"}
            )
            continue
        if found is None:
            settlements.append(
                entry | {"after": row["status"], "note": "the supplier never saw this operation"}
            )
            continue
        settled = record_receipt(db, row["id"], found)
        settlements.append(entry | {"after": settled["status"], "note": "settled by lookup"})
    return settlements


def cancel(
    db: sqlite3.Connection,
    work_id: int,
    *,
    actor: str,
    policy: SpendingPolicy,
    reason: str,
    now: float | None = None,
) -> dict:
    """The operator's controlled path to stop work, in one transaction.

    The kit's own function: the chapter describes cancellation but prints no code for it.

    Confirms that ``actor`` is an operator; advances the lease generation so whoever holds the
    work now is refused at its next transcript, completion or supplier write; finishes the
    work as CANCELED with the reason; revokes the orders never sent (DRAFT and APPROVED) and
    releases the money the APPROVED ones reserved. SENDING and UNKNOWN orders are left for
    ``reconcile``: cancelling is neither permission to transmit nor proof that the supplier
    did nothing. Finished or unknown work, or a non-operator, is refused with nothing changed;
    a ``work_id`` that is not an int, or a blank reason or one over 4000 characters, is a
    ValueError.

    Returns ``{"work_id", "generation" (the new one), "actor", "reason", "revoked" (operation
    ids), "released_cents", "left_for_reconcile" (operation ids)}``; the outcome row's result
    holds the same facts from ``actor`` on.
    """
    validate.row_id(work_id, "work_id")
    validate.string(actor, "actor")
    validate.text(reason, "a cancellation's reason")
    now = _clock(now)
    with db.immediate():
        if actor not in policy.operators:
            raise PermissionError(f"{actor!r} is not an operator and cannot cancel work")
        row = db.execute(
            "SELECT w.state, coalesce(l.generation, 0) AS generation FROM work w"
            " LEFT JOIN assignment_leases l ON l.work_id = w.work_id WHERE w.work_id = ?",
            (work_id,),
        ).fetchone()
        if row is None:
            raise PermissionError(f"there is no work {work_id!r} to cancel")
        if row["state"] == "finished":
            raise PermissionError(f"work {work_id} is already finished")
        generation = row["generation"] + 1
        authority = f"{actor}#{generation}"
        db.execute(
            "INSERT INTO assignment_leases(work_id, worker_id, expires, generation)"
            " VALUES (?, ?, ?, ?)"
            " ON CONFLICT(work_id) DO UPDATE SET worker_id = excluded.worker_id,"
            " expires = excluded.expires, generation = excluded.generation",
            (work_id, authority, now, generation),
        )
        if row["state"] == "pending":
            db.execute("UPDATE work SET state = 'running' WHERE work_id = ?", (work_id,))
        db.execute(
            "UPDATE work SET state = 'finished', worker_id = ? WHERE work_id = ?",
            (authority, work_id),
        )
        unsent = db.execute(
            "SELECT id, operation, status, amount_cents FROM assistant_orders"
            " WHERE work_id = ? AND status IN ('DRAFT', 'APPROVED') ORDER BY id",
            (work_id,),
        ).fetchall()
        released = sum(o["amount_cents"] for o in unsent if o["status"] == "APPROVED")
        db.execute("UPDATE spending_account SET reserved_cents = reserved_cents - ?", (released,))
        db.execute(
            "UPDATE assistant_orders SET status = 'REVOKED', revoked_by = ?, updated = ?"
            " WHERE work_id = ? AND status IN ('DRAFT', 'APPROVED')",
            (actor, now, work_id),
        )
        uncertain = [
            r["operation"]
            for r in db.execute(
                "SELECT operation FROM assistant_orders"
                " WHERE work_id = ? AND status IN ('SENDING', 'UNKNOWN')",
                (work_id,),
            )
        ]
        result = {
            "actor": actor,
            "reason": reason,
            "revoked": [o["operation"] for o in unsent],
            "released_cents": released,
            "left_for_reconcile": uncertain,
        }
        db.execute(
            "INSERT INTO outcomes(work_id, generation, status, result)"
            " VALUES (?, ?, 'CANCELED', ?)",
            (work_id, generation, _json(result, "result")),
        )
    return {"work_id": work_id, "generation": generation} | result


# ---------------------------------------------------------------- validation


def _durations(values: Iterable[float]) -> list[float]:
    observed = [_seconds(v, "a sample") for v in values]
    if not observed:
        raise ValueError("need at least one observed turn")
    return observed


def _seconds(value: Any, name: str) -> float:
    return validate.seconds(value, name)


def _refuse_hostile(owner: Any, ttl: Any, now: Any) -> None:
    """Beyond the book (13b, "Hostile input to claim"): a label of printable characters and
    at most 100 of them, a ttl that is a number and not a bool, and an injected ``now`` from 0
    to the year 2100. Each is a ValueError that names the value."""
    validate.label(owner, "owner", forbidden="#")
    validate.seconds(ttl, "ttl", positive=True, most=3600)
    if now is not None:
        validate.clock(now)


def _clock(now: float | None) -> float:
    return validate.clock(now)


def _json(value: Any, name: str) -> str:
    return validate.json_text(value, name)
