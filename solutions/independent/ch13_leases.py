"""Chapter 13 written a second time, independently of ``solutions/ch13_leases.py``.

A grading fixture, not a reference: the grader's similarity check must score this correct
file well below the reference, because it was written apart from it (its own structure,
queries and helpers), while the learner suite passes it. It lives under ``solutions/`` so
the reference blocker keeps it out of students' reach like the reference itself.
"""

from __future__ import annotations

import bisect
import json
import math
import sqlite3
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

# ------------------------------------------------------------------ checking arguments


def _real(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _sample_list(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        if not _real(v) or v < 0:
            raise ValueError(f"every duration must be a real number of seconds >= 0, got {v!r}")
        out.append(float(v))
    if len(out) == 0:
        raise ValueError("no durations given")
    return out


def _nonneg(x: Any, what: str) -> float:
    if not _real(x) or x < 0:
        raise ValueError(f"{what} must be a real number >= 0, got {x!r}")
    return float(x)


LATEST = 4_102_444_800.0  # 2100-01-01: the last instant an injected clock may name


def _instant(now: Any) -> float:
    if now is None:
        return time.time()
    try:
        fine = _real(now) and 0 <= now <= LATEST
    except OverflowError:  # an int too big for a float
        fine = False
    if not fine:
        raise ValueError(f"bad clock value {now!r}: seconds from 0 to {LATEST:.0f}")
    return float(now)


def _encode(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as why:
        raise ValueError(f"value is not JSON: {why}") from None


@contextmanager
def _write_txn(conn: sqlite3.Connection):
    """BEGIN IMMEDIATE ... COMMIT, rolled back when anything escapes."""
    if conn.in_transaction:
        raise RuntimeError("a transaction is already open on this connection")
    conn.execute("BEGIN IMMEDIATE")
    ok = False
    try:
        yield conn
        ok = True
    finally:
        conn.execute("COMMIT" if ok else "ROLLBACK")


# ------------------------------------------------------------------ part A


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least ``q`` percent of samples at or
    below it.

    p50, p90 and p100 of 40 samples are the 20th, 36th and 40th smallest. Empty input, a
    ``q`` outside [0, 100], NaN or a negative sample raise ValueError.
    """
    data = sorted(_sample_list(values))
    if not _real(q) or q < 0 or q > 100:
        raise ValueError(f"percentile must lie in [0, 100], got {q!r}")
    need = q * len(data) / 100
    k = int(need)
    if k < need:
        k += 1
    return data[k - 1] if k >= 1 else data[0]


def _outliving(sorted_turns: list[float], lease: float) -> float:
    longer = len(sorted_turns) - bisect.bisect_right(sorted_turns, lease)
    return longer / len(sorted_turns)


def false_expiry_share(turns: Sequence[float], lease: float) -> float:
    """Share of turns that outlive ``lease`` (strictly longer):
    how often a live holder loses its work."""
    data = sorted(_sample_list(turns))
    return _outliving(data, _nonneg(lease, "lease"))


def shortest_lease(turns: Sequence[float], target: float) -> float:
    """The smallest observed turn whose false-expiry share is at most ``target``
    (a share in [0, 1]).

    Only observed turns are candidates: a lease between two observations is a guess the
    data cannot support. ValueError when no observed turn meets the target.
    """
    data = sorted(_sample_list(turns))
    if not _real(target) or not (0 <= target <= 1):
        raise ValueError(f"target share must lie in [0, 1], got {target!r}")
    best = None
    for candidate in reversed(data):
        if _outliving(data, candidate) > target:
            break
        best = candidate
    if best is None:
        raise ValueError(f"none of the observed turns meets a false-expiry share of {target}")
    return best


def detection_delay(lease: float, turn: float, scan: float) -> float:
    """Expected seconds from a crash to its takeover: ``lease - turn/2 + scan/2``.

    The crash is uniform within a turn of length ``turn`` that began when the lease was
    taken, and the replacement polls every ``scan`` seconds. A turn longer than the lease is
    refused: then the lease would expire under a live holder and the formula does not apply.
    """
    values = {name: _nonneg(v, name) for name, v in (("lease", lease), ("turn", turn))}
    values["scan"] = _nonneg(scan, "scan")
    if values["lease"] <= 0:
        raise ValueError("lease must be positive")
    if values["turn"] > values["lease"]:
        raise ValueError("the turn is longer than the lease: false expiry, no formula")
    return values["lease"] + (values["scan"] - values["turn"]) / 2


def outlive_curve(turns: Sequence[float], leases: Iterable[float]) -> list[tuple[float, float]]:
    """``(lease, share of turns that outlive it)`` for each lease, in the order given:
    the plot's points."""
    data = sorted(_sample_list(turns))
    points = []
    for lease in leases:
        x = _nonneg(lease, "lease")
        points.append((x, _outliving(data, x)))
    return points


def fenced(writer_generation: int, current_generation: int) -> bool:
    """True when a writer holding ``writer_generation`` must be refused because the lease moved on.

    Generations only grow; a writer *ahead* of the current generation means the records are
    corrupt, so that is a ValueError rather than an answer.
    """
    pair = (writer_generation, current_generation)
    if any(isinstance(g, bool) or not isinstance(g, int) or g <= 0 for g in pair):
        raise ValueError(f"generations are integers starting at 1, got {pair!r}")
    mine, theirs = pair
    if mine > theirs:
        raise ValueError("writer is ahead of the records: they are corrupt")
    return mine != theirs


# ------------------------------------------------------------------ part B

LEASE_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE assignment_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 0",
        """CREATE TABLE transcript (seq INTEGER PRIMARY KEY AUTOINCREMENT,
            work_id INTEGER NOT NULL REFERENCES work (work_id),
            generation INTEGER NOT NULL, message TEXT NOT NULL)""",
        """CREATE TABLE outcomes (work_id INTEGER PRIMARY KEY REFERENCES work (work_id),
            generation INTEGER NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('DONE', 'BLOCKED', 'CANCELED')),
            result TEXT NOT NULL)""",
    ),
    # Unfinished work in id order, so a claim can stop at the first item it may take.
    2: ("CREATE INDEX unfinished ON work (work_id) WHERE state IN ('pending', 'running')",),
}

STATUSES = ("DONE", "BLOCKED", "CANCELED")
MAX_TTL = 3600.0


def open_worker_shop(path: str | Path) -> tuple[sqlite3.Connection, WorkQueue]:
    """Open a shop file at the chapter-11 schema plus ``LEASE_MIGRATIONS`` (line ``"leases"``)."""
    conn, queue = open_shop(path)
    conn.migrate("leases", LEASE_MIGRATIONS)
    return conn, queue


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
        return "#".join((self.owner, str(self.generation)))


def enqueue(queue: WorkQueue, source_id: str, session_id: str, text: str) -> int:
    """Admit one assignment and return its work id; a retried delivery returns the same id.

    A conflicting or refused admission (the queue's status word) raises ValueError.
    """
    said = queue.admit(source_id, session_id, text)
    if said == "accepted" or said == "duplicate":
        row = queue.store.connection.execute(
            "SELECT work_id FROM work WHERE source_id = ?", (source_id,)
        ).fetchone()
        return int(row[0])
    raise ValueError(f"{source_id!r}: the queue said {said}")


def _lease_row(conn: sqlite3.Connection, work_id: int) -> sqlite3.Row | None:
    return conn.execute(
        "SELECT generation, expires, worker_id FROM assignment_leases WHERE work_id = ?",
        (work_id,),
    ).fetchone()


def _take(conn: sqlite3.Connection, work_id: int, holder: str, expires: float, gen: int) -> None:
    if _lease_row(conn, work_id) is None:
        conn.execute(
            "INSERT INTO assignment_leases (work_id, worker_id, expires, generation)"
            " VALUES (?, ?, ?, ?)",
            (work_id, holder, expires, gen),
        )
    else:
        conn.execute(
            "UPDATE assignment_leases SET worker_id = ?, expires = ?, generation = ?"
            " WHERE work_id = ?",
            (holder, expires, gen, work_id),
        )


def _live_sessions(conn: sqlite3.Connection, now: float) -> dict[str, int]:
    """Sessions with a running item under an unexpired lease: session -> that item."""
    busy = {}
    for r in conn.execute(
        "SELECT w.session_id, w.work_id, a.expires FROM work AS w, assignment_leases AS a"
        " WHERE a.work_id = w.work_id AND w.state = 'running'"
    ):
        if r["expires"] > now:
            busy[r["session_id"]] = r["work_id"]
    return busy


def claim(
    db: sqlite3.Connection, owner: str, *, ttl: float = 90, now: float | None = None
) -> Claim | None:
    """Take the oldest eligible work item in one immediate transaction, or return None.

    Eligible: pending work, or running work whose lease has expired (its holder is dead or
    too slow to tell apart). A session with another live holder is skipped, so one
    conversation never has two turns running at once. Each claim writes generation + 1.
    ``owner`` is a non-empty label without ``#``; ``ttl`` is finite, above 0 and at most 3600.
    """
    if (
        not isinstance(owner, str)
        or owner.strip() == ""
        or "#" in owner
        or len(owner) > 100
        or not owner.isprintable()
    ):
        raise ValueError(f"bad owner label {owner!r}")
    if not _real(ttl) or ttl <= 0 or ttl > MAX_TTL:
        raise ValueError(f"bad ttl {ttl!r}")
    at = _instant(now)
    with _write_txn(db):
        busy = _live_sessions(db, at)
        for item in db.execute(  # lazily: most claims stop at the first few rows
            "SELECT work_id, session_id, text, state FROM work INDEXED BY unfinished"
            " WHERE state IN ('pending', 'running') ORDER BY work_id"
        ):
            lease = _lease_row(db, item["work_id"])
            if item["state"] == "running" and (lease is None or lease["expires"] > at):
                continue  # somebody is alive on it (or it has no lease to expire)
            if busy.get(item["session_id"], item["work_id"]) != item["work_id"]:
                continue  # its conversation has a live turn elsewhere
            gen = (lease["generation"] if lease is not None else 0) + 1
            got = Claim(item["work_id"], item["session_id"], item["text"], owner, gen, at + ttl)
            db.execute(
                "UPDATE work SET state = 'running', worker_id = ? WHERE work_id = ?",
                (got.worker_id, got.work_id),
            )
            _take(db, got.work_id, got.worker_id, got.expires, gen)
            return got
    return None


def assert_current(connection: sqlite3.Connection, held: Claim, now: float | None = None) -> float:
    """Refuse (PermissionError) unless ``held`` is the current holder of its work right now;
    else return when its lease ends.

    Four checks, each sufficient on its own to refuse: the work is running; it is run by
    ``held``'s owner; the lease is at ``held``'s generation; the lease has not expired. Call
    it inside the transaction whose write it guards, so nothing can change in between.
    """
    at = _instant(now)
    work = connection.execute(
        "SELECT state, worker_id FROM work WHERE work_id = ?", (held.work_id,)
    ).fetchone()
    lease = _lease_row(connection, held.work_id)
    reasons = []
    if work is None or lease is None:
        reasons.append("no such running work")
    else:
        if work["state"] != "running":
            reasons.append(f"state is {work['state']}")
        if str(work["worker_id"] or "").partition("#")[0] != held.owner:
            reasons.append(f"run by {work['worker_id']!r}")
        if lease["generation"] != held.generation:
            reasons.append(f"superseded: generation is now {lease['generation']}")
        if not lease["expires"] > at:
            reasons.append("lease expired")
    if reasons:
        raise PermissionError(
            f"{held.worker_id} may not write work {held.work_id}: " + "; ".join(reasons)
        )
    return float(lease["expires"])


def observe(db: sqlite3.Connection, held: Claim, message: dict[str, Any]) -> None:
    """Append one transcript message for the held work, at the writer's generation.

    The holder check and the insert share one transaction: a refused writer leaves no row.
    A message JSON cannot hold (NaN, say) is a ValueError and writes nothing.
    """
    payload = _encode(message)
    with _write_txn(db):
        assert_current(db, held)
        db.execute(
            "INSERT INTO transcript (work_id, generation, message) VALUES (?, ?, ?)",
            (held.work_id, held.generation, payload),
        )


def finish(db: sqlite3.Connection, held: Claim, status: str, result: str) -> None:
    """Record the outcome (DONE, BLOCKED or CANCELED) with its text and move the work to
    finished, fenced.

    One transaction: the holder check, the outcome row at the writer's generation, and the
    state move. A stale or repeated finish is refused and changes nothing.
    """
    if status not in STATUSES:
        raise ValueError(f"unknown outcome {status!r}")
    with _write_txn(db):
        assert_current(db, held)
        db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (held.work_id,))
        db.execute(
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
    """Take over one expired or pending item and continue it from the records alone.

    No model is consulted: the work's APPROVED, SENDING and UNKNOWN orders go through
    ``execute`` (which looks an uncertain order up by its operation id before any send).
    DONE when every order is then conclusive; BLOCKED when none was approved, or one is
    still uncertain or refused, for an operator to decide. ``{"status": "IDLE"}`` when
    nothing is eligible, else the status with ``work`` and ``generation``.
    """
    mine = claim(db, owner, ttl=ttl)
    if mine is None:
        return {"status": "IDLE"}
    notes: list[str] = []
    todo = [
        o["id"] for o in orders_for(db, mine.work_id) if o["status"] in {"APPROVED", *UNCERTAIN}
    ]
    for order_id in todo:
        try:
            execute(db, mine, order_id, supplier, policy=policy)
        except PermissionError as no:
            notes.append(f"order {order_id} refused: {no}")
    final = orders_for(db, mine.work_id)
    if not any(o["status"] in CONCLUSIVE for o in final):
        notes.append("nothing approved to continue; an operator must decide")
    notes.extend(f"order {o['id']} still {o['status']}" for o in final if o["status"] in UNCERTAIN)
    verdict = "DONE" if not notes else "BLOCKED"
    why = "; ".join(notes)
    said = ", ".join(f"{o['operation']} {o['status']}" for o in final)
    finish(db, mine, verdict, f"{verdict}: {why or 'every order settled'} ({said})")
    return {"status": verdict, "work": mine.work_id, "generation": mine.generation}


def reconcile(db: sqlite3.Connection, supplier: Supplier) -> list[dict]:
    """Settle the SENDING and UNKNOWN orders of finished work by looking them up; never send.

    A found receipt is recorded (ACCEPTED spends the reservation, REJECTED releases it). An
    operation the supplier never saw, or a supplier that does not answer, leaves the order
    UNKNOWN with its reservation kept, and the returned row says which.
    """
    finished = {
        r[0] for r in db.execute("SELECT work_id FROM work WHERE state = 'finished'").fetchall()
    }
    pending = [
        dict(r)
        for r in db.execute(
            "SELECT id, operation, status, work_id, supplier FROM assistant_orders ORDER BY id"
        ).fetchall()
        if r["work_id"] in finished
        and r["status"] in UNCERTAIN
        and r["supplier"] == supplier.identity
    ]
    lines = []
    for order in pending:
        line = {"order_id": order["id"], "operation": order["operation"]}
        line["before"] = order["status"]
        try:
            receipt = supplier.lookup(order["operation"])
        except ConnectionError as down:
            lines.append(line | {"after": order["status"], "note": f"no answer: {down}"})
            continue
        if receipt is None:
            lines.append(line | {"after": order["status"], "note": "unknown to the supplier"})
        else:
            after = record_receipt(db, order["id"], receipt)["status"]
            lines.append(line | {"after": after, "note": "settled from the supplier's receipt"})
    return lines


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

    Checks that ``actor`` is an operator; advances the lease generation so whoever holds the
    work now is refused at its next transcript, completion or supplier write; finishes the
    work as CANCELED with the reason; revokes the orders approved but never sent and
    releases their money. SENDING and UNKNOWN orders are left for ``reconcile``: cancelling
    is neither permission to transmit nor proof that the supplier did nothing. Finished or
    unknown work, or a non-operator, is refused with nothing changed.

    Returns ``{"work_id", "generation" (the new one), "actor", "reason", "revoked" (operation
    ids), "released_cents", "left_for_reconcile" (operation ids)}``; the outcome row's result
    holds the same facts from ``actor`` on.
    """
    if not isinstance(reason, str) or reason.strip() == "":
        raise ValueError("give a reason for cancelling")
    at = _instant(now)
    with _write_txn(db):
        if actor not in policy.operators:
            raise PermissionError(f"only an operator may cancel; {actor!r} is not one")
        work = db.execute("SELECT state FROM work WHERE work_id = ?", (work_id,)).fetchone()
        if work is None or work["state"] == "finished":
            raise PermissionError(f"work {work_id!r} cannot be cancelled (missing or finished)")
        lease = _lease_row(db, work_id)
        gen = 1 + (0 if lease is None else lease["generation"])
        stamp = f"{actor}#{gen}"
        _take(db, work_id, stamp, at, gen)
        if work["state"] == "pending":  # work moves pending -> running -> finished, never skips
            db.execute("UPDATE work SET state = 'running' WHERE work_id = ?", (work_id,))
        db.execute(
            "UPDATE work SET state = 'finished', worker_id = ? WHERE work_id = ?",
            (stamp, work_id),
        )
        revoked, freed, left = [], 0, []
        for o in db.execute(
            "SELECT id, operation, status, amount_cents FROM assistant_orders"
            " WHERE work_id = ? ORDER BY id",
            (work_id,),
        ).fetchall():
            if o["status"] in ("DRAFT", "APPROVED"):
                revoked.append(o["operation"])
                freed += o["amount_cents"] if o["status"] == "APPROVED" else 0
                db.execute(
                    "UPDATE assistant_orders SET status = 'REVOKED', revoked_by = ?, updated = ?"
                    " WHERE id = ?",
                    (actor, at, o["id"]),
                )
            elif o["status"] in UNCERTAIN:
                left.append(o["operation"])
        if freed:
            db.execute("UPDATE spending_account SET reserved_cents = reserved_cents - ?", (freed,))
        facts = {
            "actor": actor,
            "reason": reason,
            "revoked": revoked,
            "released_cents": freed,
            "left_for_reconcile": left,
        }
        db.execute(
            "INSERT INTO outcomes (work_id, generation, status, result) VALUES (?, ?, ?, ?)",
            (work_id, gen, "CANCELED", _encode(facts)),
        )
    return dict(work_id=work_id, generation=gen, **facts)
