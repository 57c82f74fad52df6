"""Chapter 13: your file. Leases, generations, fences and recovery from records.

You own this file and only this file. Part B's ready-made parts arrive written, as the chapter
gives them: ``LEASE_MIGRATIONS``, ``open_worker_shop``, ``Claim`` and ``enqueue``. Every
other function is a stub that raises ``NotStarted``; the notebook section it names teaches
what it must do. Replace the ``raise NotStarted(...)`` line with your code, keeping the
signature and the docstring. ``reconcile`` and ``cancel`` are the kit's own functions: the
chapter describes them but prints no code for them.

Test your work at any time:

    make check                          # every function: NOT STARTED / FAILING / PASSING
    make check IMPL=path/to/file.py     # the same for another file

``make check`` ends with the real process-kill checkpoint, run against this file with the
reference solutions out of reach: nothing here may import ``solutions``. Its table also has a
row ``claim (beyond the book)``: what 13b teaches past the chapter (a claim that refuses
hostile input and stays fast with 10,000 items queued). That row is checked and shown, but
it never fails a chapter row, the checkpoint or ``make check`` itself.

What you may use: the standard library and the runtime of earlier chapters, which you read
but never edit. A shop ``db`` answers ``db.immediate()`` (one write transaction, yielding the
connection), ``db.migrate(line, migrations)`` and ``db.connection``; its queue's
``queue.admit(source_id, session_id, text)`` answers ``"accepted"``, ``"duplicate"``,
``"conflict"`` or ``"refused"``. ``lucyshop.approval`` gives ``open_shop``, ``execute``,
``orders_for``, ``record_receipt``, ``SpendingPolicy`` and ``CONCLUSIVE``; ``lucyshop.validate``
raises the ValueError a docstring's limits ask for (``clock`` for ``now``, ``string``,
``text``, ``json_text``, ``row_id``).
"""

from __future__ import annotations

import json  # noqa: F401  (you will need these)
import math  # noqa: F401
import sqlite3
import time  # noqa: F401
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop import validate  # noqa: F401  (the limits the docstrings state)
from lucyshop.approval import (  # noqa: F401
    CONCLUSIVE,
    SpendingPolicy,
    Supplier,
    execute,
    open_shop,
    orders_for,
    record_receipt,
)
from lucyshop.lab import NotStarted
from lucyshop.queue import WorkQueue

# ---------------------------------------------------------------- Part A: slow or dead?


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least ``q`` percent of samples at or
    below it.

    p50, p90 and p100 of 40 samples are the 20th, 36th and 40th smallest. Empty input, a
    ``q`` outside [0, 100], or a sample that is NaN, infinite or negative raise ValueError.
    """
    raise NotStarted("percentile", "13a § Percentiles of a turn")


def false_expiry_share(turns: Sequence[float], lease: float) -> float:
    """Share of turns that outlive ``lease`` (strictly longer):
    how often a live holder loses its work.

    Every turn and the lease are finite seconds >= 0: NaN or infinity is a ValueError.
    """
    raise NotStarted("false_expiry_share", "13a § False expiry is the latency tail")


def shortest_lease(turns: Sequence[float], target: float) -> float:
    """The smallest observed turn whose false-expiry share is at most ``target``
    (a share in [0, 1]).

    Only observed turns are candidates: a lease between two observations is a guess the
    data cannot support. ValueError when no observed turn meets the target.
    """
    raise NotStarted("shortest_lease", "13a § The shortest safe lease")


def detection_delay(lease: float, turn: float, scan: float) -> float:
    """Expected seconds from a crash to its takeover: ``lease - turn/2 + scan/2``.

    The crash is uniform within a turn of length ``turn`` that began when the lease was
    taken, and the replacement polls every ``scan`` seconds. A turn longer than the lease is
    refused: then the lease would expire under a live holder and the formula does not apply.
    Each argument is finite seconds >= 0 (a lease above 0): NaN or infinity is a ValueError.
    """
    raise NotStarted("detection_delay", "13a § Detection delay")


def outlive_curve(turns: Sequence[float], leases: Iterable[float]) -> list[tuple[float, float]]:
    """``(lease, share of turns that outlive it)`` for each lease, in the order given:
    the plot's points."""
    raise NotStarted("outlive_curve", "13a § The outlive curve")


def fenced(writer_generation: int, current_generation: int) -> bool:
    """True when a writer holding ``writer_generation`` must be refused because the lease moved on.

    Generations only grow; a writer *ahead* of the current generation means the records are
    corrupt, so that is a ValueError rather than an answer.
    """
    raise NotStarted("fenced", "13a § Generations fence stale writers")


# ---------------------------------------------------------------- Part B: durable claims

# Written for you (13b § A schema for leases): version 1 of the line "leases".
LEASE_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # Each claim writes the next generation, so even an owner label used again names a
        # new acquisition of the work.
        "ALTER TABLE assignment_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 1",
        """CREATE TABLE transcript(
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            work_id    INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            message    TEXT NOT NULL
        )""",
        """CREATE TABLE outcomes(
            work_id    INTEGER PRIMARY KEY,
            generation INTEGER NOT NULL,
            status     TEXT NOT NULL CHECK (status IN ('DONE', 'BLOCKED', 'CANCELED')),
            result     TEXT NOT NULL
        )""",
    ),
    # Beyond the book (13b § A claim at any queue length): a version 2 here may add the index
    # that lets ``claim`` walk the open work in age order instead of sorting it. The row
    # ``claim (beyond the book)`` of make check measures that; the chapter's rows do not.
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
    answer = queue.admit(source_id, session_id, text)
    if answer not in ("accepted", "duplicate"):
        raise ValueError(f"the queue answered {answer!r} to work {source_id!r}")
    (work_id,) = queue.store.connection.execute(
        "SELECT work_id FROM work WHERE source_id = ?", (source_id,)
    ).fetchone()
    return work_id


# Beyond the book (13b § Hostile input to claim, 13b § A claim at any queue length): the
# row ``claim (beyond the book)`` also asks ``claim`` to refuse an owner label with control
# characters or over 100 characters, a bool ttl and an injected ``now`` outside [0, 2100],
# and to cost about the same with 9,900 items queued as with 200. Graded apart: the
# chapter's ``claim`` row never asks it.
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
    raise NotStarted("claim", "13b § Claim work in one transaction")


def assert_current(connection: sqlite3.Connection, held: Claim, now: float | None = None) -> float:
    """Return the lease's expiry if ``held`` is still the current, unexpired holder of its
    work; otherwise raise PermissionError.

    It compares the work's state, its worker id (owner and generation), the lease's
    generation and the expiry. Call it inside the transaction of the write it guards.
    """
    raise NotStarted("assert_current", "13b § The current-holder check")


def observe(db: sqlite3.Connection, held: Claim, message: dict[str, Any]) -> None:
    """Append one transcript message for the held work, recorded at the writer's generation.

    The holder check and the insert share one transaction, so a refused writer leaves no row.
    """
    raise NotStarted("observe", "13b § Fence the transcript")


def finish(db: sqlite3.Connection, held: Claim, status: str, result: str) -> None:
    """End the held work with its outcome (DONE, BLOCKED or CANCELED) and a result text.

    Only the current holder may: the check, the state move and the outcome row are one
    transaction, so a stale or repeated finish changes nothing.
    """
    raise NotStarted("finish", "13b § Fence the completion")


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
    raise NotStarted("recover_once", "13b § Recover from records, not a model")


def reconcile(db: sqlite3.Connection, supplier: Supplier) -> list[dict]:
    """Settle the SENDING and UNKNOWN orders of finished work by looking them up; never send.

    The kit's own function: the chapter describes reconciliation but prints no code for it.

    A found receipt is recorded (ACCEPTED spends the reservation, REJECTED releases it). An
    operation the supplier never saw, or a supplier that does not answer, leaves the order as
    it was (SENDING stays SENDING, UNKNOWN stays UNKNOWN) with its reservation kept, and the
    returned row's ``note`` says which.
    """
    raise NotStarted("reconcile", "13b § Reconcile what is still unknown")


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
    raise NotStarted("cancel", "13b § Cancel through the operator")
