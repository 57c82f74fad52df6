"""Chapter 13: your file. Leases, generations, fences and recovery from records.

You own this file and only this file. Every function below is a stub that raises
``NotStarted``; the notebook section it names teaches what it must do. Replace the
``raise NotStarted(...)`` line with your code, keeping the signature and the docstring.

Test your work at any time:

    make check                          # every function: NOT STARTED / FAILING / PASSING
    make check IMPL=path/to/file.py     # the same for another file

``make check`` ends with the real process-kill checkpoint, run against this file with the
reference solutions blocked: nothing here may import ``solutions``.

What you may use: the standard library and the runtime of earlier chapters, which you read
but never edit: ``lucyshop.store`` (``immediate``, ``migrate``), ``lucyshop.queue``
(``WorkQueue``), ``lucyshop.approval`` (``open_shop``, ``execute``, ``orders_for``,
``record_receipt``, ``SpendingPolicy``), and ``lucyshop.validate``, whose validators raise the
ValueError each docstring's limits ask for (``seconds`` for a duration, ``clock`` for
``now``, ``label`` for an owner, ``string``, ``text``, ``json_text``, ``row_id``).
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
    UNCERTAIN,
    SpendingPolicy,
    Supplier,
    execute,
    open_shop,
    orders_for,
    record_receipt,
)
from lucyshop.lab import NotStarted
from lucyshop.queue import WorkQueue
from lucyshop.store import immediate, migrate  # noqa: F401

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

# 13b § A schema for leases: one migration (version 1) that adds a ``generation`` column to
# ``assignment_leases`` and creates ``transcript(seq, work_id, generation, message)`` and
# ``outcomes(work_id PK, generation, status IN DONE/BLOCKED/CANCELED, result)``; and a second
# (version 2) with the index ``claim`` walks instead of sorting: open work in age order,
# ``CREATE INDEX work_open ON work(work_id) WHERE state != 'finished'``.
LEASE_MIGRATIONS: dict[int, tuple[str, ...]] = {}

STATUSES = ("DONE", "BLOCKED", "CANCELED")
MAX_TTL = 3600.0


def open_worker_shop(path: str | Path) -> tuple[sqlite3.Connection, WorkQueue]:
    """Open a shop file at the chapter-11 schema plus ``LEASE_MIGRATIONS`` (line ``"leases"``)."""
    raise NotStarted("open_worker_shop", "13b § A schema for leases")


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
        raise NotStarted("Claim.worker_id", "13b § Who holds the work")


def enqueue(queue: WorkQueue, source_id: str, session_id: str, text: str) -> int:
    """Admit one assignment and return its work id; a retried delivery returns the same id.

    A conflicting or refused admission raises ValueError with the queue's reason.
    """
    raise NotStarted("enqueue", "13b § Admit the assignments")


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
    raise NotStarted("claim", "13b § Claim work in one transaction")


def assert_current(connection: sqlite3.Connection, held: Claim, now: float | None = None) -> None:
    """Refuse (PermissionError) unless ``held`` is the current holder of its work right now.

    Four comparisons, each sufficient on its own to refuse: the work is running; it is run by
    ``held``'s owner; the lease is at ``held``'s generation; the lease has not expired. Call
    it inside the transaction whose write it guards, so nothing can change in between.
    """
    raise NotStarted("assert_current", "13b § The current-holder check")


def observe(db: sqlite3.Connection, held: Claim, message: Any, *, now: float | None = None) -> int:
    """Append one transcript message (any JSON value) for the held work; return its seq.

    The holder check and the insert share one transaction: a refused writer leaves no row.
    The row records the writer's generation. A message that is not JSON (or holds NaN), or is
    over 65536 characters as JSON, is a ValueError and writes nothing.
    """
    raise NotStarted("observe", "13b § Fence the transcript")


def finish(
    db: sqlite3.Connection, held: Claim, status: str, result: Any, *, now: float | None = None
) -> None:
    """Record the outcome (DONE, BLOCKED or CANCELED) and move the work to finished, fenced.

    One transaction: the holder check, the outcome row at the writer's generation, and the
    state move. A stale or repeated finish is refused and changes nothing. A result that is not
    JSON, or is over 65536 characters as JSON, is a ValueError.
    """
    raise NotStarted("finish", "13b § Fence the completion")


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
    raise NotStarted("recover_once", "13b § Recover from records, not a model")


def reconcile(db: sqlite3.Connection, supplier: Supplier) -> list[dict]:
    """Settle the SENDING and UNKNOWN orders of finished work by looking them up; never send.

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
