"""Chapter 13, the reference: leases, generations, fences and recovery from records.

This is the complete twin of ``learner/ch13_leases.py``. Every function here has the same
signature and docstring as its stub there (a test keeps them in step). The checkpoint and the
learner tests run either file; when they run a student's file, this one is blocked.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop import validate
from lucyshop.approval import (
    CONCLUSIVE,
    UNCERTAIN,
    SpendingPolicy,
    Supplier,
    execute,
    open_shop,
    orders_for,
    record_receipt,
)
from lucyshop.queue import WorkQueue
from lucyshop.store import immediate, migrate

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
        # Which execution holds the lease: every claim adds one, so a reused owner label
        # still names a new execution.
        "ALTER TABLE assignment_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE transcript(
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            work_id    INTEGER NOT NULL REFERENCES work(work_id),
            generation INTEGER NOT NULL,
            message    TEXT NOT NULL
        )""",
        """CREATE TABLE outcomes(
            work_id    INTEGER PRIMARY KEY REFERENCES work(work_id),
            generation INTEGER NOT NULL,
            status     TEXT NOT NULL CHECK (status IN ('DONE', 'BLOCKED', 'CANCELED')),
            result     TEXT NOT NULL
        )""",
    ),
    2: (
        # Open work (pending or running) in age order: claim walks it from the oldest and
        # stops at the first eligible item, so a claim costs the same at any queue length
        # and any amount of finished history. SQLite uses a partial index only for a query
        # whose WHERE repeats the index's condition, here `state != 'finished'`.
        "CREATE INDEX work_open ON work(work_id) WHERE state != 'finished'",
    ),
}

STATUSES = ("DONE", "BLOCKED", "CANCELED")
MAX_TTL = 3600.0


def open_worker_shop(path: str | Path) -> tuple[sqlite3.Connection, WorkQueue]:
    """Open a shop file at the chapter-11 schema plus ``LEASE_MIGRATIONS`` (line ``"leases"``)."""
    db, queue = open_shop(path)
    migrate(db, "leases", LEASE_MIGRATIONS)
    return db, queue


@dataclass(frozen=True)
class Claim:
    """One execution's hold on one work item. A cache of the records, never the authority."""

    work_id: int
    session_id: str
    text: str
    owner: str
    generation: int
    expires: float

    @property
    def worker_id(self) -> str:
        """``owner#generation``: chapter 11's holder check compares this,
        so it fences by generation."""
        return f"{self.owner}#{self.generation}"


def enqueue(queue: WorkQueue, source_id: str, session_id: str, text: str) -> int:
    """Admit one assignment and return its work id; a retried delivery returns the same id.

    A conflicting or refused admission raises ValueError with the queue's reason.
    """
    admission = queue.admit(source_id, session_id, text)
    if admission.status in ("accepted", "duplicate"):
        return admission.work_id
    raise ValueError(
        f"work {source_id!r} was not admitted ({admission.status}): {admission.reason}"
    )


def claim(
    db: sqlite3.Connection, owner: str, *, ttl: float = 90, now: float | None = None
) -> Claim | None:
    """Take the oldest eligible work item in one immediate transaction, or return None.

    Eligible: pending work, or running work whose lease has expired (its holder is dead or
    too slow to tell apart). A session with another live holder is skipped, so one
    conversation never has two turns running at once. Each claim writes generation + 1, so a
    work item's first claim is generation 1. ``owner`` is a non-empty label of at most 100
    characters without ``#`` or control characters; ``ttl`` is finite, above 0 and at most 3600
    (infinity is refused); an injected ``now`` lies from 0 to 4102444800 (the year 2100).
    Anything else is a ValueError.

    Walk the open work in age order (the ``work_open`` index of migration 2) and stop at the
    first eligible item; never sort the eligible set, or every claim slows down as work
    piles up. A claim with 9,900 items queued must cost about what it costs with 200.
    """
    _check_owner(owner)
    ttl = _ttl(ttl)
    now = _clock(now)
    with immediate(db):
        # Oldest first among: pending, or running with an expired lease; never a session
        # in which some other item is running under a lease that is still alive.
        # It walks work_open (open work in age order) and stops at the first match, so
        # nothing is sorted and a claim costs the same at 200 or 10,000 items queued: it reads
        # past only live holders and the waiting turns of busy sessions.
        # INDEXED BY turns that plan into a guarantee: without the index it fails loudly.
        row = db.execute(
            """SELECT w.work_id, w.session_id, w.text, coalesce(l.generation, 0) AS generation
                 FROM work w INDEXED BY work_open
                 LEFT JOIN assignment_leases l ON l.work_id = w.work_id
                WHERE w.state != 'finished'
                  AND (w.state = 'pending' OR (w.state = 'running' AND l.expires <= :now))
                  AND NOT EXISTS (
                      SELECT 1 FROM work o JOIN assignment_leases ol ON ol.work_id = o.work_id
                       WHERE o.session_id = w.session_id AND o.work_id != w.work_id
                         AND o.state = 'running' AND ol.expires > :now)
                ORDER BY w.work_id LIMIT 1""",
            {"now": now},
        ).fetchone()
        if row is None:
            return None
        held = Claim(
            row["work_id"], row["session_id"], row["text"], owner, row["generation"] + 1, now + ttl
        )
        db.execute(
            "UPDATE work SET state = 'running', worker_id = ? WHERE work_id = ?",
            (held.worker_id, held.work_id),
        )
        db.execute(
            "INSERT INTO assignment_leases(work_id, worker_id, expires, generation)"
            " VALUES (?, ?, ?, ?)"
            " ON CONFLICT(work_id) DO UPDATE SET worker_id = excluded.worker_id,"
            " expires = excluded.expires, generation = excluded.generation",
            (held.work_id, held.worker_id, held.expires, held.generation),
        )
    return held


def assert_current(connection: sqlite3.Connection, held: Claim, now: float | None = None) -> None:
    """Refuse (PermissionError) unless ``held`` is the current holder of its work right now.

    Four comparisons, each sufficient on its own to refuse: the work is running; it is run by
    ``held``'s owner; the lease is at ``held``'s generation; the lease has not expired. Call
    it inside the transaction whose write it guards, so nothing can change in between.
    """
    now = _clock(now)
    row = connection.execute(
        "SELECT w.state, w.worker_id, l.generation, l.expires"
        " FROM work w LEFT JOIN assignment_leases l ON l.work_id = w.work_id WHERE w.work_id = ?",
        (held.work_id,),
    ).fetchone()
    if row is None:
        raise PermissionError(f"work {held.work_id} does not exist")
    if row["state"] != "running":
        raise PermissionError(f"work {held.work_id} is {row['state']}, not running")
    holder = (row["worker_id"] or "").split("#")[0]
    if holder != held.owner:
        raise PermissionError(f"work {held.work_id} is held by {holder!r}, not {held.owner!r}")
    if row["generation"] != held.generation:
        raise PermissionError(
            f"claim for work {held.work_id} generation {held.generation}"
            f" is superseded by generation {row['generation']}"
        )
    if row["expires"] <= now:
        raise PermissionError(
            f"the lease of {held.worker_id} on work {held.work_id} expired "
            f"{now - row['expires']:.3f}s ago"
        )


def observe(db: sqlite3.Connection, held: Claim, message: Any, *, now: float | None = None) -> int:
    """Append one transcript message (any JSON value) for the held work; return its seq.

    The holder check and the insert share one transaction: a refused writer leaves no row.
    The row records the writer's generation. A message that is not JSON (or holds NaN), or is
    over 65536 characters as JSON, is a ValueError and writes nothing.
    """
    text = _json(message, "message")
    with immediate(db):
        assert_current(db, held, now)
        cursor = db.execute(
            "INSERT INTO transcript(work_id, generation, message) VALUES (?, ?, ?)",
            (held.work_id, held.generation, text),
        )
        return int(cursor.lastrowid)


def finish(
    db: sqlite3.Connection, held: Claim, status: str, result: Any, *, now: float | None = None
) -> None:
    """Record the outcome (DONE, BLOCKED or CANCELED) and move the work to finished, fenced.

    One transaction: the holder check, the outcome row at the writer's generation, and the
    state move. A stale or repeated finish is refused and changes nothing. A result that is not
    JSON, or is over 65536 characters as JSON, is a ValueError.
    """
    if status not in STATUSES:
        raise ValueError(f"status is one of {', '.join(STATUSES)}, not {status!r}")
    text = _json(result, "result")
    with immediate(db):
        assert_current(db, held, now)
        db.execute(
            "INSERT INTO outcomes(work_id, generation, status, result) VALUES (?, ?, ?, ?)",
            (held.work_id, held.generation, status, text),
        )
        db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (held.work_id,))


@dataclass(frozen=True)
class Recovery:
    """What one ``recover_once`` did: IDLE (nothing to take), DONE or BLOCKED."""

    status: str
    work_id: int | None = None
    generation: int | None = None
    receipts: tuple[dict, ...] = ()
    reason: str = ""


def recover_once(
    db: sqlite3.Connection,
    *,
    owner: str,
    supplier: Supplier,
    policy: SpendingPolicy,
    ttl: float = 30,
) -> Recovery:
    """Take over one expired or pending item and continue it from the records alone.

    No model is consulted: the work's APPROVED, SENDING and UNKNOWN orders go through
    ``execute`` (which looks an uncertain order up by its operation id before any send).
    DONE when every order is then conclusive; BLOCKED when none was approved, or one is
    still uncertain or refused, for an operator to decide. IDLE when nothing is eligible.
    """
    held = claim(db, owner, ttl=ttl)
    if held is None:
        return Recovery("IDLE")
    receipts, problems = [], []
    for order in orders_for(db, held.work_id):
        if order["status"] not in ("APPROVED", *UNCERTAIN):
            continue
        try:
            receipts.append(execute(db, held, order["order_id"], supplier, policy=policy))
        except PermissionError as refused:
            problems.append(f"order {order['order_id']}: {refused}")
    orders = orders_for(db, held.work_id)
    settled = [o for o in orders if o["status"] in CONCLUSIVE]
    if not settled:
        problems.append("no approved order to continue: the next step needs a person")
    problems += [
        f"order {o['order_id']} is {o['status']}" for o in orders if o["status"] in UNCERTAIN
    ]
    status = "BLOCKED" if problems else "DONE"
    reason = "; ".join(problems)
    finish(
        db,
        held,
        status,
        {"orders": [(o["operation"], o["status"]) for o in orders], "reason": reason},
    )
    return Recovery(status, held.work_id, held.generation, tuple(receipts), reason)


def reconcile(db: sqlite3.Connection, supplier: Supplier) -> list[dict]:
    """Settle the SENDING and UNKNOWN orders of finished work by looking them up; never send.

    A found receipt is recorded (ACCEPTED spends the reservation, REJECTED releases it). An
    operation the supplier never saw, or a supplier that does not answer, leaves the order as
    it was (SENDING stays SENDING, UNKNOWN stays UNKNOWN) with its reservation kept, and the
    returned row's ``note`` says which.
    """
    rows = db.execute(
        "SELECT o.order_id, o.operation, o.status FROM assistant_orders o JOIN work w"
        " ON w.work_id = o.work_id WHERE w.state = 'finished'"
        " AND o.status IN ('SENDING', 'UNKNOWN')"
        " AND o.supplier = ? ORDER BY o.order_id",
        (supplier.identity,),
    ).fetchall()
    settlements = []
    for row in rows:
        entry = {
            "order_id": row["order_id"],
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
        settled = record_receipt(db, row["order_id"], found)
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
    with immediate(db):
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
            "SELECT order_id, operation, status, amount_cents FROM assistant_orders"
            " WHERE work_id = ? AND status IN ('DRAFT', 'APPROVED') ORDER BY order_id",
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


def _check_owner(owner: Any) -> None:
    validate.label(owner, "owner", forbidden="#")


def _ttl(ttl: Any) -> float:
    return validate.seconds(ttl, "ttl", positive=True, most=MAX_TTL)


def _clock(now: float | None) -> float:
    return validate.clock(now)


def _json(value: Any, name: str) -> str:
    return validate.json_text(value, name)
