"""Solutions 13: worked answers to the exercise book (notebook 13c), each one runnable.

    python solutions/exercises.py 1|2|3|4 [--dir DIR]        # one answer, its observations
    python solutions/exercises.py 5|6 [--quick] [--out FILE]  # a measured answer and its receipt
    python solutions/exercises.py verify FILE                 # recompute a receipt's figures

Each answer uses the chapter through ``chapter()``, never ``import solutions``, and returns
what it read back; exercises 5 and 6 are ideas (``renew``, ``keep_renewing``,
``records_message``) that ``measure_renewal`` and ``measure_records`` run and measure.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop import approval, validate
from lucyshop.lab.exercises.runs import measure_records, measure_renewal
from lucyshop.lab.given import (
    OPERATOR,
    OWNER,
    POLICY,
    VANILLA,
    HeldTurn,
    attempt,
    dead_endpoint,
    lease_row,
    load_chapter,
    outcome_row,
    rows,
    supplier_process,
    transcript_rows,
    wait_until,
)
from lucyshop.store import connect
from lucyshop.supplier import SupplierClient, ledger_orders

HERE = Path(__file__).resolve()
CHOCOLATE = {"sku": "chocolate-tub", "quantity": 5, "unit_cents": 500}  # 2500 cents
DEADLINE = 30.0  # the longest any single wait here may take
LONGEST_LEASE = 3600.0  # the chapter's claim takes no longer lease, and no renewal grants one


def chapter() -> ModuleType:
    """The chapter-13 functions: ``$LEASES_IMPL``, else the ``ch13_leases.py`` beside this file."""
    return load_chapter(HERE)


# ================================================================ Exercise 1


class _ExecutionLog:
    """A worker's log file, one line per event, naming the owner *and* the execution."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []

    def __call__(self, held: Any, event: str) -> str:
        line = f"work={held.work_id} owner={held.owner} execution={held.worker_id} {event}"
        self.lines.append(line)
        with self.path.open("a", encoding="utf-8") as log:
            log.write(line + "\n")
        return line


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

    What it shows: an owner label names a service, not an execution. Both claims say
    ``owner=lucy-worker``, so a log, a lock or a holder check keyed on the label alone cannot
    tell the dead execution from the live one. The generation can: the lease row moved to 2,
    so the first execution's completion is refused as *superseded* (its lease has not even
    expired by then: the row carries the new execution's 30 s), and chapter 11's unchanged
    supplier guard refuses it too, because ``worker_id`` is ``lucy-worker#1``, not ``#2``.
    The one log line that tells the executions apart is the refusal, which names both.
    """
    leases = chapter()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    shop = directory / "exercise1.db"
    log = _ExecutionLog(directory / "exercise1.log")
    db, queue = leases.open_worker_shop(shop)
    try:
        work_id = leases.enqueue(
            queue, "ex1-1", "session-a", "Order six tubs of vanilla for Saturday"
        )
        first = leases.claim(db, OWNER, ttl=0.2)
        log(first, f"claimed (lease {0.2:g}s)")
        wait_until(
            lambda: time.time() > first.expires, timeout=DEADLINE, what="the first lease to expire"
        )
        log(first, "stalled past its lease")
        second = leases.claim(db, OWNER, ttl=30)
        log(second, "claimed (the lease had expired)")
        leases.observe(
            db, second, {"role": "assistant", "text": "Six tubs of vanilla, ordering now."}
        )
        refused = {
            "transcript": attempt(
                lambda: leases.observe(db, first, {"role": "assistant", "text": "late"})
            ),
            "completion": attempt(
                lambda: leases.finish(db, first, "DONE", f"Finished by {first.worker_id}.")
            ),
            "supplier": attempt(
                lambda: approval.propose(db, first, supplier="dairy", proposal=VANILLA)
            ),
        }
        current = lease_row(db, work_id)
        telling = log(
            first,
            f"completion refused; the lease is held by execution {current['worker_id']}: "
            f"{refused['completion']}",
        )
        leases.finish(db, second, "DONE", f"Finished by {second.worker_id}.")
        log(second, "finished DONE")
        return {
            "shop": str(shop),
            "log_file": str(log.path),
            "work_id": work_id,
            "owners": [first.owner, second.owner],
            "generations": [first.generation, second.generation],
            "worker_ids": [first.worker_id, second.worker_id],
            "first_expired_before_second_claim": second.expires - 30 > first.expires,
            "refused": refused,
            "lease": lease_row(db, work_id),
            "outcome": outcome_row(db, work_id),
            "transcript_generations": [row["generation"] for row in transcript_rows(db, work_id)],
            "orders": len(approval.orders_for(db, work_id)),
            "log": list(log.lines),
            "telling_line": telling,
        }
    finally:
        db.close()


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

    What it shows: cancelling is a write to the records, not a message to the worker. It
    finishes the work and moves the generation on, so the worker, still running, finds out only
    at its next fenced write, and that write is refused (first by the state guard: the work is
    no longer running; the stale generation would refuse it too): its late result never lands.
    When the supplier already has the order, cancelling cannot take it back and must not pretend
    to: the order stays UNKNOWN with its money reserved, nothing holds the authority to send it
    again, and only a lookup by its operation id (``reconcile``) makes it ACCEPTED and spent.
    The supplier's ledger holds exactly one order throughout.
    """
    leases = chapter()
    directory = Path(directory)
    return {
        "delayed_turn": _cancel_held_turn(leases, directory / "delayed-turn"),
        "accepted_order": _cancel_accepted_order(leases, directory / "accepted-order"),
    }


def _cancel_held_turn(leases: ModuleType, directory: Path) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    shop = directory / "shop.db"
    db, queue = leases.open_worker_shop(shop)
    try:
        work_id = leases.enqueue(queue, "delayed-1", "session-a", "Which flavours are there today?")
        held = leases.claim(db, OWNER, ttl=30)
        turn = HeldTurn(
            shop,
            lambda wdb: leases.observe(
                wdb, held, {"role": "user", "text": "Which flavours today?"}
            ),
            lambda wdb: {
                "completion": attempt(
                    lambda: leases.finish(wdb, held, "DONE", "Vanilla, chocolate and lemon sorbet.")
                )
            },
        )
        turn.start()
        if not turn.ready.wait(DEADLINE):
            raise TimeoutError("the worker's turn never started")
        cancelled = leases.cancel(
            db, work_id, actor=OPERATOR, policy=POLICY, reason="the customer left"
        )
        turn.release.set()
        report = turn.finish_within(DEADLINE)
        return {
            "shop": str(shop),
            "work_id": work_id,
            "held_generation": held.generation,
            "cancel": cancelled,
            "worker": {
                "transcript_seq": report.get("work"),
                **report.get("completion", {}),
                **({"error": report["error"]} if "error" in report else {}),
            },
            "work_state": queue.get(work_id)["state"],
            "lease": lease_row(db, work_id),
            "outcome": outcome_row(db, work_id),
            "transcript": transcript_rows(db, work_id),
        }
    finally:
        db.close()


def _order_state(db: sqlite3.Connection, order_id: int) -> dict[str, Any]:
    return {"order": approval.get_order(db, order_id)["status"], "account": approval.account(db)}


CLIENT_TIMEOUT = 0.5  # the worker's supplier client gives up after this
REPLY_DELAY = 2.0  # the supplier holds its reply this long after committing the order


def _cancel_accepted_order(leases: ModuleType, directory: Path) -> dict[str, Any]:
    directory.mkdir(parents=True, exist_ok=True)
    shop = directory / "shop.db"
    with supplier_process(directory / "supplier") as supplier:
        client = supplier.client(timeout=CLIENT_TIMEOUT)
        db, queue = leases.open_worker_shop(shop)
        try:
            work_id = leases.enqueue(queue, "accepted-1", "session-b", "Order six tubs of vanilla")
            held = leases.claim(db, OWNER, ttl=30)
            order = approval.propose(db, held, supplier=client.identity, proposal=VANILLA)
            approval.approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=POLICY)
            supplier.set_faults(delay_next=1, delay_seconds=REPLY_DELAY)
            turn = HeldTurn(
                shop,
                lambda wdb: approval.execute(wdb, held, order["id"], client, policy=POLICY),
                lambda wdb: {
                    "send_again": attempt(
                        lambda: approval.execute(wdb, held, order["id"], client, policy=POLICY)
                    ),
                    "completion": attempt(
                        lambda: leases.finish(wdb, held, "DONE", "Six tubs ordered.")
                    ),
                },
            )
            turn.start()
            wait_until(
                lambda: ledger_orders(supplier.database),
                timeout=DEADLINE,
                what="the supplier to accept the order",
            )
            at_cancel = approval.get_order(db, order["id"])["status"]
            cancelled = leases.cancel(
                db, work_id, actor=OPERATOR, policy=POLICY, reason="the customer called to cancel"
            )
            if not turn.ready.wait(DEADLINE):
                raise TimeoutError("the worker's send never returned")
            turn.release.set()
            report = turn.finish_within(DEADLINE)
            after_cancel = _order_state(db, order["id"])
            unreachable = SupplierClient(
                dead_endpoint(), identity=client.identity, timeout=CLIENT_TIMEOUT
            )
            while_unreachable = leases.reconcile(db, unreachable)
            after_unreachable = _order_state(db, order["id"])
            reconciled = leases.reconcile(db, client)
            settled = approval.get_order(db, order["id"])
            return {
                "shop": str(shop),
                "ledger_file": str(supplier.database),
                "work_id": work_id,
                "operation": order["operation"],
                "amount_cents": order["amount_cents"],
                "held_generation": held.generation,
                "order_status_at_cancel": at_cancel,
                "cancel": cancelled,
                "worker": {
                    "receipt": report.get("work"),
                    **report.get("completion", {}),
                    **({"error": report["error"]} if "error" in report else {}),
                },
                "after_cancel": after_cancel,
                "reconcile_unreachable": while_unreachable,
                "after_unreachable": after_unreachable,
                "reconcile": reconciled,
                "order": {
                    "status": settled["status"],
                    "receipt": json.loads(settled["receipt"] or "null"),
                },
                "account": approval.account(db),
                "outcome": outcome_row(db, work_id),
                "lease": lease_row(db, work_id),
                "ledger": ledger_orders(supplier.database),
            }
        finally:
            db.close()


# ================================================================ Exercise 3


def observe_without_fence(db: sqlite3.Connection, held: Any, message: dict[str, Any]) -> None:
    """A copy of the chapter's ``observe`` with one fence removed: the holder check.

    The rest is unchanged: one immediate transaction, the row written at the writer's
    generation, the message stored as JSON (NaN or infinity is a ValueError, and writes nothing).
    """
    with db.immediate() as connection:
        # The fence that was here: chapter().assert_current(connection, held)
        connection.execute(
            "INSERT INTO transcript (work_id, generation, message) VALUES (?, ?, ?)",
            (held.work_id, held.generation, json.dumps(message, allow_nan=False)),
        )


STALE_LEASE = 30.0  # exercise 3's lease; its first claim is made two leases in the past


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

    What it shows: fences are per write, not per worker. Removing the holder check from one write
    path lets a stale execution put a row into the transcript (generation 1 after generation
    2's, so whoever reads it next reads a conversation the live execution never had) even
    though ``finish`` still refuses the same claim. The completion being safe says nothing
    about the transcript. With the fence restored the same write raises PermissionError and
    the row is absent from the table: a refusal you can read back, not a warning in a log.
    """
    leases = chapter()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "time": "generation 1 claimed two leases in the past (claim's now=), generation 2 now",
        "without_fence": _stale_transcript_write(
            leases, directory / "without-fence.db", observe_without_fence
        ),
        "with_fence": _stale_transcript_write(leases, directory / "with-fence.db", leases.observe),
    }


def _stale_transcript_write(
    leases: ModuleType, shop: Path, write: Callable[[Any, Any, dict[str, Any]], None]
) -> dict[str, Any]:
    db, queue = leases.open_worker_shop(shop)
    try:
        work_id = leases.enqueue(queue, "ex3-1", "session-a", "Is the pistachio nut-free?")
        old = leases.claim(db, OWNER, ttl=STALE_LEASE, now=time.time() - 2 * STALE_LEASE)
        new = leases.claim(db, OWNER, ttl=STALE_LEASE)
        leases.observe(db, new, {"role": "assistant", "text": "No: pistachio is a nut."})
        late = attempt(
            lambda: write(db, old, {"role": "assistant", "text": "Yes, it is nut-free."})
        )
        completion = attempt(lambda: leases.finish(db, old, "DONE", "It is nut-free."))
        leases.finish(db, new, "DONE", "Pistachio is a nut: not nut-free.")
        transcript = transcript_rows(db, work_id)
        return {
            "shop": str(shop),
            "work_id": work_id,
            "generations": [old.generation, new.generation],
            "late_write": late,
            "stale_completion": completion,
            "transcript": transcript,
            "stale_rows": [row for row in transcript if row["generation"] != new.generation],
            "outcome": outcome_row(db, work_id),
        }
    finally:
        db.close()


# ================================================================ Exercise 4

CEILING_POLICY = approval.SpendingPolicy(
    frozenset({OPERATOR}), total_cents=5_000, automatic_order_cents=5_000
)
PROPOSALS = {"session-anna": VANILLA, "session-ben": CHOCOLATE}  # 2700 + 2500 > 5000, each fits


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

    What it shows: the session rule is a lock on a conversation, not on the account. It
    serialises Anna's two turns (the third claim waits), but Anna's and Ben's turns run at the
    same time, and both may spend. What stops the overspend is the ceiling guard inside
    ``approve``'s own transaction: whichever approval takes the write lock first reserves its
    money, and the other finds the account already committed and is refused. Exactly one
    order is reserved and the account never exceeds its ceiling. A shared resource needs its
    own guard at its own write, whatever locks the work.
    """
    leases = chapter()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    shop = directory / "exercise4.db"
    db, queue = leases.open_worker_shop(shop)
    try:
        items = {
            "anna": leases.enqueue(
                queue, "ex4-1", "session-anna", "Six tubs of vanilla for Anna's party"
            ),
            "ben": leases.enqueue(
                queue, "ex4-2", "session-ben", "Five tubs of chocolate for Ben's party"
            ),
            "anna-again": leases.enqueue(queue, "ex4-3", "session-anna", "And some cones, please"),
        }
        barrier = threading.Barrier(3, timeout=DEADLINE)
        results: dict[str, dict[str, Any]] = {}
        threads = [
            threading.Thread(
                target=_spending_worker, args=(leases, shop, name, barrier, results), daemon=True
            )
            for name in ("till-1", "till-2")
        ]
        for thread in threads:
            thread.start()
        try:
            barrier.wait()  # both claim now
            barrier.wait()  # both hold their claims
            running = rows(
                db,
                "SELECT w.work_id, w.session_id, l.worker_id, l.expires FROM work w"
                " JOIN assignment_leases l USING (work_id) WHERE w.state = 'running'"
                " ORDER BY w.work_id",
            )
            third = leases.claim(db, "till-3", ttl=30)
            barrier.wait()  # both approve now
        finally:  # a worker that failed broke the barrier: its own error is the one to see
            for thread in threads:
                thread.join(DEADLINE)
            _raise_first_failure(results)
        orders = rows(
            db,
            "SELECT id, work_id, amount_cents, status FROM assistant_orders ORDER BY id",
        )
        return {
            "shop": str(shop),
            "ceiling_cents": CEILING_POLICY.total_cents,
            "items": items,
            "held_at_once": running,
            "third_claim": None if third is None else third.worker_id,
            "workers": {
                name: {k: v for k, v in r.items() if k != "exception"}
                for name, r in results.items()
            },
            "orders": orders,
            "account": approval.account(db),
        }
    finally:
        db.close()


def _raise_first_failure(results: dict[str, dict[str, Any]]) -> None:
    """Raise a worker thread's exception here, in the caller's thread, naming the worker: the
    cause, not the BrokenBarrierError it may have left in the other worker."""
    failed = [(name, r["exception"]) for name, r in results.items() if "exception" in r]
    failed.sort(key=lambda failure: isinstance(failure[1], threading.BrokenBarrierError))
    if failed:
        name, error = failed[0]
        error.add_note(f"raised in worker {name}")
        raise error


def _spending_worker(
    leases: ModuleType,
    shop: Path,
    name: str,
    barrier: threading.Barrier,
    results: dict[str, dict[str, Any]],
) -> None:
    result: dict[str, Any] = {}
    results[name] = result
    db = connect(shop)
    try:
        barrier.wait()
        held = leases.claim(db, name, ttl=30)
        result |= {"work_id": held.work_id, "session": held.session_id, "worker_id": held.worker_id}
        barrier.wait()
        order = approval.propose(db, held, supplier="dairy", proposal=PROPOSALS[held.session_id])
        result |= {"order_id": order["id"], "amount_cents": order["amount_cents"]}
        barrier.wait()
        result["approval"] = (
            attempt(
                lambda: approval.approve(
                    db,
                    order["id"],
                    actor=OPERATOR,
                    digest=order["digest"],
                    policy=CEILING_POLICY,
                )
            )
            or "APPROVED"
        )
    except BaseException as error:  # noqa: BLE001 - kept for the parent thread
        result["error"] = f"{type(error).__name__}: {error}"
        result["exception"] = error
        barrier.abort()
    finally:
        db.close()


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
    leases = chapter()
    ttl = validate.seconds(ttl, "ttl", positive=True, most=LONGEST_LEASE)
    if isinstance(progress, bool) or not isinstance(progress, int) or progress < 0:
        raise ValueError(f"progress is a whole number from 0: {progress!r}")
    bound = None if bound is None else validate.seconds(bound, "bound", positive=True)
    now = time.time() if now is None else float(now)
    with db.immediate() as connection:
        current = leases.assert_current(connection, held, now)  # the lease's expiry
        last = connection.execute(
            "SELECT progress, progressed_at FROM lease_renewals"
            " WHERE work_id = ? AND generation = ?"
            " ORDER BY seq DESC LIMIT 1",
            (held.work_id, held.generation),
        ).fetchone()
        if last is not None and progress < last["progress"]:
            raise ValueError(f"progress only grows: {progress} after {last['progress']}")
        progressed_at = (
            now if last is None or progress > last["progress"] else last["progressed_at"]
        )
        expires = now + ttl
        if bound is not None:
            limit = progressed_at + bound
            if now >= limit:
                raise PermissionError(
                    f"work {held.work_id} made no progress for {now - progressed_at:.3f}s (the "
                    f"bound is {bound:g}s): {held.worker_id} may not renew; its lease is left to "
                    "expire"
                )
            expires = min(expires, limit)
        expires = max(expires, current)
        connection.execute(
            "UPDATE assignment_leases SET expires = ? WHERE work_id = ? AND generation = ?",
            (expires, held.work_id, held.generation),
        )
        connection.execute(
            "INSERT INTO lease_renewals"
            "(work_id, generation, progress, progressed_at, renewed_at, expires)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (held.work_id, held.generation, progress, progressed_at, now, expires),
        )
    return dataclasses.replace(held, expires=expires)


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
    tick = time.monotonic()
    while not stopped.is_set():
        at, done = time.time(), progress()
        try:
            renewed = renew(db, held, ttl=ttl, progress=done, bound=bound, now=at)
        except PermissionError as refused:
            report({"at": at, "granted": False, "progress": done, "refusal": str(refused)})
            return str(refused)
        report({"at": at, "granted": True, "progress": done, "expires": renewed.expires})
        tick = max(tick + interval, time.monotonic())
        stopped.wait(max(0.0, tick - time.monotonic()))
    return None


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

    What it shows: a renewing lease can be short without a live worker losing its work. At the
    median, a plain lease expires under about half of all turns; renewed every third of a lease,
    none, for one small transaction each time. A crash is noticed after about a lease less half
    a renewal interval, where without renewal the only safe lease was twice the longest turn.
    The cost is a new failure: the renewer, a separate thread, proves that the process is alive,
    not the turn. A hung turn with an unbounded renewer keeps its lease as long as the process
    lives, and no replacement ever takes the work. Tying renewal to progress (never more than
    the bound past the last step) fixes it: the bounded hung turn is taken over about a bound
    after its last progress, and the next renewal is refused, not just late. The bound has its
    own price, which the bounded arm measures: progress is seen only between steps, so a live
    step slower than the bound is cut as if it had hung. The bound is a judgement, made from the
    pilot, of how slow a live step can be; a machine slower than the pilot's is what breaks it.
    """
    return measure_renewal(
        out,
        answers=HERE,
        quick=quick,
        backend=backend,
        model=model,
        seed=seed,
        workdir=workdir,
        progress=progress,
    )


# ================================================================ Exercise 6


def records_message(order: dict[str, Any]) -> str:
    """The last message the replacement reads: what the shop's records say about ``order`` (a
    row of ``assistant_orders``: ``operation``, ``supplier``, ``proposal``, ``status``), and the
    shop's rule for an order whose status is UNKNOWN (look it up by its key first).
    """
    proposal = order["proposal"]
    proposal = json.loads(proposal) if isinstance(proposal, str) else proposal
    return (
        "The worker running this conversation crashed right after that place_order call, and no "
        "reply from the supplier was recorded.\n\n"
        "The shop's records for this order:\n"
        f"- operation key: {order['operation']}\n"
        f"- supplier: {order['supplier']}\n"
        f"- order: {proposal['quantity']} x {proposal['sku']}\n"
        f"- status: {order['status']} (it was sent; whether the supplier has it is not known)\n\n"
        "The shop's rule: an order whose status is UNKNOWN is looked up first, with "
        f'lookup_order(operation="{order["operation"]}"). Never place it again: the supplier may '
        "already have it.\n\nContinue the task."
    )


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

    What it shows: a replacement can only act on what it is given. The plain transcript
    shows a call and no reply; read as a conversation, the obvious next step is to make the
    call again, and a small model often does. The records say what the conversation cannot:
    the order was sent and its outcome is unknown, and the shop's rule is to look it up by
    its key first. How much a model's behaviour moves when the records are in the message is
    the figure; where it still re-orders, that is why recovery in this chapter reads the
    records itself (``recover_once``) and never asks a model what happened. The supplier's
    idempotent key makes a re-order under the shop's own key harmless (the same receipt comes
    back); a re-order under any other key, mistyped or invented (counted on its own), is a
    second order that nobody can recognise as a repeat.
    """
    return measure_records(
        out,
        answers=HERE,
        message=records_message,
        quick=quick,
        backend=backend,
        models=models,
        seed=seed,
        workdir=workdir,
        progress=progress,
        ollama=ollama,
    )


if __name__ == "__main__":  # the command line the docstring shows: lucyshop.lab.exercises.book
    from lucyshop.lab.exercises.book import main

    sys.exit(main(__file__))
