"""Exercises 13: your answers to the exercise book (notebook 13c).

You own this file, beside your ``ch13_leases.py``. Each answer is a function that raises
``NotStarted``: replace that line with your answer, keeping the signature, and replace the
"Explain in your own words" paragraph of its docstring with your explanation. Notebook 13c,
section "Exercise N", says what each one asks. Test your work at any time:

    make check                                                      # a row per exercise
    .venv/bin/python -m pytest spec/exercises/test_exercise_3.py --impl learner -q
    .venv/bin/python learner/exercises.py N [--quick]               # one answer on its own
    .venv/bin/python learner/exercises.py verify FILE               # recompute a receipt

Exercises 5 and 6 are measurements: you write the ideas (``renew``, ``keep_renewing``,
``records_message``) and ``measure_renewal`` or ``measure_records`` runs them, writing a
receipt to ``learner/runs/``. Use the chapter through ``chapter()``, never ``import
solutions``. Beside the runtime (``lucyshop.store``, ``lucyshop.approval``,
``lucyshop.supplier``, ``lucyshop.validate``), an answer may use what is imported below, each
documented in ``lucyshop.lab.given``.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop import approval, validate  # noqa: F401  (you may need these)
from lucyshop.lab.exercises.runs import measure_records, measure_renewal  # noqa: F401
from lucyshop.lab.given import (  # noqa: F401  (given: each documented in lucyshop.lab.given)
    OPERATOR,
    OWNER,
    POLICY,
    RENEWAL_MIGRATIONS,
    VANILLA,
    HeldTurn,
    NotStarted,
    attempt,
    dead_endpoint,
    lease_row,
    load_chapter,
    outcome_row,
    prepare_renewals,
    rows,
    supplier_process,
    transcript_rows,
    wait_until,
)

HERE = Path(__file__).resolve()


def chapter() -> ModuleType:
    """The chapter-13 functions: ``$LEASES_IMPL``, else the ``ch13_leases.py`` beside this file."""
    return load_chapter(HERE)


# ================================================================ Exercise 1


def exercise_1_reuse_owner_label(directory: Path) -> dict:
    """Reuse the owner label: acquire, let the lease expire, reacquire under the same owner.

    One shop, one work item, the owner label ``lucy-worker`` both times and real time (a
    0.2 s lease, waited out). The first execution then comes back and tries its transcript,
    its completion and a supplier proposal with its old claim; each is refused. Then the
    second execution finishes the work DONE: generation 2's is the only outcome row.

    Returns a dict with (at least) ``shop`` and ``log_file`` (the paths, to read back),
    ``work_id``, ``worker_ids`` (both executions'), ``refused`` (``transcript``,
    ``completion`` and ``supplier``: each ``'PermissionError: why'``) and ``telling_line``
    (the log line that shows the two executions apart, as written to the log file).

    Explain in your own words (replace this paragraph with your answer): why can the owner
    label not tell the two executions apart, what refused the old claim's completion, and
    which log line shows the executions apart?
    """
    raise NotStarted("exercise_1_reuse_owner_label", "13c § Exercise 1 Reuse the owner label")


# ================================================================ Exercise 2


def exercise_2_cancel_while_delayed(directory: Path) -> dict:
    """Cancel while a result is delayed, twice: a held turn, then an order the supplier accepted.

    Part one: a worker thread claims a turn, writes its first transcript row and is held
    before its completion; the operator cancels through ``cancel``; then the turn is released
    and its completion is refused. Part two: a real supplier process accepts the order and
    holds its reply longer than the client's timeout; the operator cancels while the worker
    waits; the worker's send ends UNKNOWN. Its claim can neither send again nor finish. The
    money stays reserved while the supplier cannot be asked (a lookup against an address
    nobody answers), and ``reconcile`` finds the receipt by lookup alone.

    Returns ``{"delayed_turn": ..., "accepted_order": ...}``. Each part has ``shop`` and
    ``work_id``, and ``worker`` with what the worker's late writes got (``completion``, and for the
    order also ``send_again``: ``'PermissionError: why'`` each). The order part also has
    ``ledger_file`` (the ledger file: ``.database`` of what ``supplier_process`` yields),
    ``operation``, ``amount_cents``, ``after_cancel`` and ``after_unreachable`` (each
    ``{"order": status, "account": {...}}``) and ``reconcile`` (its rows once answered).

    Explain in your own words (replace this paragraph with your answer): how does a worker
    that is still running learn it was cancelled, why is its late completion refused, and
    why does the accepted order stay UNKNOWN, its money reserved, until a lookup settles it?
    """
    raise NotStarted(
        "exercise_2_cancel_while_delayed", "13c § Exercise 2 Cancel while a result is delayed"
    )


# ================================================================ Exercise 3


def observe_without_fence(db: sqlite3.Connection, held: Any, message: dict[str, Any]) -> None:
    """A copy of the chapter's ``observe`` with one fence removed: the holder check.

    The rest is unchanged: one immediate transaction, the row written at the writer's
    generation, the message stored as JSON (NaN or infinity is a ValueError, and writes nothing).
    """
    raise NotStarted("observe_without_fence", "13c § Exercise 3 Remove one fence from a copy")


def exercise_3_remove_one_fence(directory: Path) -> dict:
    """Remove one fence from a copy: the same stale write, through the copy and through ``observe``.

    Two fresh shops run one script. Generation 1 is claimed in the past (``claim``'s ``now``,
    two leases ago), so its lease has already run out by the clock when generation 2 claims the
    work at the real time and writes its row. Then generation 1 comes back with a late
    transcript row and a completion. In the first shop the late row goes through
    ``observe_without_fence``; in the second through the chapter's ``observe``. Each shop ends
    with generation 2 finishing the work DONE: its outcome is the only one, as generation 1's
    completion is refused either way.

    Returns ``{"without_fence": ..., "with_fence": ...}``, each with ``shop``, ``work_id``,
    ``late_write`` and ``stale_completion`` (``''`` when the write went through, else
    ``'PermissionError: why'``).

    Explain in your own words (replace this paragraph with your answer): why does the stale
    row get into the transcript although finish still refuses the same claim, and what do
    you read back once the fence is restored?
    """
    raise NotStarted("exercise_3_remove_one_fence", "13c § Exercise 3 Remove one fence from a copy")


# ================================================================ Exercise 4


def exercise_4_sessions_vs_ceiling(directory: Path) -> dict:
    """Sessions vs the account ceiling: two sessions hold work at once and both want to spend.

    One shop, an account ceiling of 5000 cents, and three items: Anna's, Ben's, and a second
    message from Anna. Two worker threads (own connections) claim at the same moment (a
    barrier); each gets one session's item, and a third claim for Anna's second message gets
    nothing. Each proposes its order (2700 and 2500 cents: each fits, together they do not),
    and both approvals are recorded at the same moment.

    Returns a dict with ``shop``, ``ceiling_cents``, ``held_at_once`` (the running work rows
    read while both claims were held: ``work_id``, ``session_id``, ``worker_id``),
    ``third_claim`` (the ``worker_id`` it got, or None) and ``workers`` (per worker thread:
    ``work_id``, ``order_id``, ``amount_cents`` and ``approval``: ``'APPROVED'`` or
    ``'PermissionError: why'``).

    Explain in your own words (replace this paragraph with your answer): what does the
    session rule protect and what does it not, and what keeps the account within its
    ceiling?
    """
    raise NotStarted(
        "exercise_4_sessions_vs_ceiling", "13c § Exercise 4 Sessions vs the account ceiling"
    )


# ================================================================ Exercise 5


def renew(
    db: sqlite3.Connection,
    held: Any,
    *,
    ttl: float,
    progress: int,
    bound: float | None = None,
    now: float | None = None,
) -> Any:
    """Extend the held lease to ``now + ttl``, fenced, and return the claim with its new expiry.

    One immediate transaction: ``assert_current`` (so only the current, unexpired holder may
    renew: a renewal never revives a lease that has run out or moved on), then the renewal.
    ``progress`` is how far the turn has got (a count that only grows, e.g. steps finished).
    With a ``bound``, the lease is never carried more than ``bound`` seconds past the moment
    progress last advanced: the expiry is capped there, and once it is reached the renewal is
    refused (PermissionError) and the lease left to run out. Without one, any live renewer can
    keep the lease forever. A renewal never shortens a lease. Each granted renewal is one row
    of ``lease_renewals(seq, work_id, generation, progress, progressed_at, renewed_at, expires)``
    (``prepare_renewals`` adds the table; ``progressed_at``: when ``progress`` last grew).
    """
    raise NotStarted("renew", "13c § Exercise 5 Renew the lease, and measure what it costs")


def keep_renewing(
    db: sqlite3.Connection,
    held: Any,
    *,
    ttl: float,
    interval: float,
    bound: float | None,
    progress: Callable[[], int],
    stopped: threading.Event,
    report: Callable[[dict[str, Any]], None],
) -> str | None:
    """The renewer: renew ``held`` every ``interval`` seconds until ``stopped`` is set or a
    renewal is refused; return the refusal (None when stopped).

    The first renewal is at once (it marks where the turn began). Each renewal passes
    ``progress()``, how far the turn has got, and ``bound``. Every attempt, granted or refused,
    goes to ``report=`` as ``{"at", "granted", "progress"}`` with ``"expires"`` or ``"refusal"``.
    The experiment's workers run this in a thread beside their turns (``--answers``).
    """
    raise NotStarted("keep_renewing", "13c § Exercise 5 Renew the lease, and measure what it costs")


def exercise_5_renewal(
    out: Path,
    *,
    quick: bool = False,
    backend: str = "embedded",
    model: str | None = None,
    seed: int = 13,
    workdir: Path | None = None,
    progress: bool = False,
) -> dict:
    """Renew the lease at the pilot median, and measure what renewal buys and what it costs.

    Real model turns, real processes, real time, measured by ``measure_renewal(out,
    answers=HERE, ...)`` with the Part A experiment's phases and workers, each worker renewing
    with *this file's* ``keep_renewing`` and ``renew``. A pilot of real turns gives the median
    (the lease) and the maximum (the bound: twice it, which is also the safe lease without
    renewal). Then, with the experiment's replacement scanning every 50 ms: false expiry under
    the median lease for one worker process whose trials interleave three arms (no renewal,
    renewing every third of the lease, the same bounded by progress); detection of a SIGKILLed
    renewing worker; and two hung turns (a step that never returns) whose renewers keep
    running, one unbounded and one bounded. ``out`` gets the receipt (verified by
    ``lucyshop.lab.exercises.exercise_receipts``); ``workdir`` (default a temporary directory)
    keeps the shops to read back. Renewing every third of the lease is beyond the book, whose
    exercise renews halfway through the turn: at the half, one renewal that comes late (a busy
    machine, another writer's lock) already loses the lease; at a third, the next one is
    still in time.

    Returns a dict with ``receipt`` (its path), ``figures``, ``observations`` and ``shops``
    (with a ``workdir``: the directories ``false-expiry``, ``detection`` and ``hung``, each
    holding the ``shop.db`` its phase used, with ``lease_renewals``).

    Explain in your own words (replace this paragraph with your answer): what does renewal
    buy (false expiry, detection delay) and what does it cost, why can a hung turn keep its
    lease forever, and how does tying renewal to progress fix it? Use your receipt's
    figures.
    """
    raise NotStarted(
        "exercise_5_renewal", "13c § Exercise 5 Renew the lease, and measure what it costs"
    )


# ================================================================ Exercise 6


def records_message(order: dict[str, Any]) -> str:
    """The last message the replacement reads: what the shop's records say about ``order`` (a
    row of ``assistant_orders``: ``operation``, ``supplier``, ``proposal``, ``status``), and the
    shop's rule for an order whose status is UNKNOWN (look it up by its key first).
    """
    raise NotStarted("records_message", "13c § Exercise 6 Give the replacement the records")


def exercise_6_records(
    out: Path,
    *,
    quick: bool = False,
    backend: str = "embedded",
    models: Sequence[str] | None = None,
    seed: int = 13,
    workdir: Path | None = None,
    progress: bool = False,
    ollama: bool = True,
) -> dict:
    """Give the replacement the records: the recovery measurement again, with and without them.

    Measured by ``measure_records(out, answers=HERE, message=records_message, ...)``
    (``lucyshop.lab.exercises.runs``). First the records are made for real: a shop
    whose worker sent the order to a real supplier process that committed it and lost the
    reply, so the shop's row says UNKNOWN with its money reserved, and the supplier's ledger
    holds the order. Then each model answers the experiment's crashed transcript (its
    recovery phase, unchanged) and the same transcript whose last message is this file's
    ``records_message`` for that row. Same seeds, same tools (``place_order``,
    ``lookup_order(operation)``). Models: ``backend`` with ``models`` (None: its default),
    and, with ``ollama``, the qwen2.5 models of an Ollama server if one answers. Counts:
    placed again, looked up with the right key, neither. ``out`` gets the receipt
    (``lucyshop.lab.exercises.exercise_receipts`` verifies it).

    Returns a dict with ``receipt`` (its path), ``figures``, ``observations`` and, with a
    ``workdir``, ``shop`` and ``ledger_file``: the records as the shop and the supplier hold them.

    Explain in your own words (replace this paragraph with your answer): how did the models'
    answers change when the records were in the message, why does the chapter's recovery
    read the records itself instead of asking a model, and when would a model call during
    recovery still be the right thing? Use your receipt's figures.
    """
    raise NotStarted("exercise_6_records", "13c § Exercise 6 Give the replacement the records")


# ================================================================ command line

if __name__ == "__main__":
    from lucyshop.lab.exercises.book import main

    sys.exit(main(__file__))
