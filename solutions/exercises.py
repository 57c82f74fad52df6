"""Solutions 13: worked answers to the exercise book (notebook 13c), each one runnable.

    python solutions/exercises.py 1|2|3|4 [--dir DIR]        # one answer, its observations
    python solutions/exercises.py 5|6 [--quick] [--out FILE]  # a measured answer and its receipt
    python solutions/exercises.py check FILE                  # recompute a receipt's figures

Every answer uses the chapter functions of the implementation that ``$LEASES_IMPL`` names
(``learner``, ``solutions`` or a path), loaded with ``load_impl``; when it is unset, the
``ch13_leases.py`` beside this file. Nothing here imports ``solutions``: a run with the
reference blocked may read exactly this file and the chapter file beside it.

Each answer returns what it observed, read back from the shop's database (and the supplier's
own ledger where there is one), and its docstring ends with "What it shows:". The measured
answers (5, 6) write a receipt whose every figure ``lucyshop.lab.exercise_receipts`` recomputes
from the raw observations stored beside it. ``tests/exercises`` judges them all.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tqdm import tqdm

from lucyshop import approval
from lucyshop.lab import exercise_receipts as receipts
from lucyshop.lab.experiment import phases
from lucyshop.lab.experiment.backend import (
    OLLAMA_HOST,
    TEMPERATURE,
    describe,
    open_model,
    warm_up,
)
from lucyshop.lab.experiment.tasks import (
    OPERATION,
    RECOVERY_TOOLS,
    SUPPLIER,
    crashed_transcript,
    kind_of,
    turn_messages,
)
from lucyshop.lab.experiment.worker import SHOP, lease_start, take_new_work, wait_finished
from lucyshop.lab.loader import ENV, impl_path, load_impl
from lucyshop.lab.processes import (
    Children,
    python_argv,
    wait_exit,
    wait_for_file,
    wait_until,
    write_ready,
)
from lucyshop.lab.renewals import RENEWAL_MIGRATIONS, prepare_renewals  # noqa: F401  (given)
from lucyshop.lab.stubs import NotStarted
from lucyshop.lab.suppliers import supplier_process
from lucyshop.store import connect, immediate
from lucyshop.supplier import SupplierClient, ledger_orders

HERE = Path(__file__).resolve()
OWNER = "lucy-worker"  # every execution runs under the shop's one service name
OPERATOR = "lucy"
POLICY = approval.SpendingPolicy(
    frozenset({OPERATOR}), total_cents=10_000, automatic_order_cents=5_000
)
VANILLA = {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450}  # 2700 cents
CHOCOLATE = {"sku": "chocolate-tub", "quantity": 5, "unit_cents": 500}  # 2500 cents
DEADLINE = 30.0  # the longest any single wait here may take
MAX_TTL = 3600.0


def chapter_path() -> Path:
    """The chapter file these answers use: ``$LEASES_IMPL``, else the one beside this file."""
    return impl_path(os.environ.get(ENV) or HERE.with_name("ch13_leases.py"))


_CHAPTER: dict[Path, ModuleType] = {}


def chapter() -> ModuleType:
    """The chapter-13 functions, loaded once per process with ``load_impl``."""
    path = chapter_path()
    if path not in _CHAPTER:
        _CHAPTER[path] = load_impl(path)
    return _CHAPTER[path]


def _attempt(write: Callable[[], Any]) -> str:
    """``''`` when the write went through, ``'PermissionError: why'`` (or another error's name
    and message) when it did not. A stub's ``NotStarted`` is not an answer: it propagates."""
    try:
        write()
    except NotStarted:
        raise
    except Exception as error:  # noqa: BLE001 - reported, then judged
        return f"{type(error).__name__}: {error}"
    return ""


def _rows(db: sqlite3.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in db.execute(sql, args)]


def _lease_row(db: sqlite3.Connection, work_id: int) -> dict[str, Any]:
    return dict(
        db.execute("SELECT * FROM assignment_leases WHERE work_id = ?", (work_id,)).fetchone()
    )


def _outcome_row(db: sqlite3.Connection, work_id: int) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT generation, status, result FROM outcomes WHERE work_id = ?", (work_id,)
    ).fetchone()
    return (
        None
        if row is None
        else {"generation": row[0], "status": row[1], "result": json.loads(row[2])}
    )


def _transcript_rows(db: sqlite3.Connection, work_id: int) -> list[dict[str, Any]]:
    return [
        {"seq": r["seq"], "generation": r["generation"], "message": json.loads(r["message"])}
        for r in db.execute("SELECT * FROM transcript WHERE work_id = ? ORDER BY seq", (work_id,))
    ]


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
    supplier check refuses it too, because ``worker_id`` is ``lucy-worker#1``, not ``#2``.
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
            "transcript": _attempt(
                lambda: leases.observe(db, first, {"role": "assistant", "text": "late"})
            ),
            "completion": _attempt(
                lambda: leases.finish(db, first, "DONE", {"by": first.worker_id})
            ),
            "supplier": _attempt(
                lambda: approval.propose(db, first, supplier="dairy", proposal=VANILLA)
            ),
        }
        current = _lease_row(db, work_id)
        telling = log(
            first,
            f"completion refused; the lease is held by execution {current['worker_id']}: "
            f"{refused['completion']}",
        )
        leases.finish(db, second, "DONE", {"by": second.worker_id})
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
            "lease": _lease_row(db, work_id),
            "outcome": _outcome_row(db, work_id),
            "transcript_generations": [row["generation"] for row in _transcript_rows(db, work_id)],
            "orders": len(approval.orders_for(db, work_id)),
            "log": list(log.lines),
            "telling_line": telling,
        }
    finally:
        db.close()


# ================================================================ Exercise 2


class _HeldTurn(threading.Thread):
    """A worker's turn on its own connection: ``work`` runs, then the turn is held until
    ``release`` before ``complete`` runs. What each returned or raised is kept in ``result``."""

    def __init__(
        self,
        shop: Path,
        work: Callable[[sqlite3.Connection], Any],
        complete: Callable[[sqlite3.Connection], dict[str, str]],
    ) -> None:
        super().__init__(daemon=True)
        self.shop, self.work, self.complete = shop, work, complete
        self.ready, self.release = threading.Event(), threading.Event()
        self.result: dict[str, Any] = {}

    def run(self) -> None:
        db = connect(self.shop)
        try:
            self.result["work"] = self.work(db)
            self.ready.set()
            if not self.release.wait(DEADLINE):
                self.result["error"] = "the turn was never released"
                return
            self.result["completion"] = self.complete(db)
        except BaseException as error:  # noqa: BLE001 - reported to the parent thread
            self.result["error"] = f"{type(error).__name__}: {error}"
            self.result["exception"] = error
        finally:
            self.ready.set()
            db.close()

    def finish_within(self, seconds: float) -> dict[str, Any]:
        self.join(seconds)
        if self.is_alive():
            raise TimeoutError(f"the worker's turn did not end within {seconds:g}s")
        if isinstance(self.result.get("exception"), NotStarted):
            raise self.result["exception"]
        return {k: v for k, v in self.result.items() if k != "exception"}


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
    ``work_id``, and ``worker`` with what the worker's late writes got (``completion``, and
    for the order also ``send_again``: ``'PermissionError: why'`` each). The order part also
    has ``ledger_file`` (the supplier's), ``operation``, ``amount_cents``, ``after_cancel``
    and ``after_unreachable`` (each ``{"order": status, "account": {...}}``) and
    ``reconcile`` (the rows ``reconcile`` returned once the supplier answered).

    What it shows: cancelling is a write to the records, not a message to the worker. It
    advances the generation, so the worker, still running, finds out only at its next fenced
    write, and that write is refused: its late result never lands. When the supplier already
    has the order, cancelling cannot take it back and must not pretend to: the order stays
    UNKNOWN with its money reserved, nothing holds the authority to send it again, and only a
    lookup by its operation id (``reconcile``) turns it into ACCEPTED and spent. The supplier's
    ledger holds exactly one order throughout.
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
        turn = _HeldTurn(
            shop,
            lambda wdb: leases.observe(
                wdb, held, {"role": "user", "text": "Which flavours today?"}
            ),
            lambda wdb: {
                "completion": _attempt(
                    lambda: leases.finish(
                        wdb, held, "DONE", {"reply": "Vanilla, chocolate and lemon sorbet."}
                    )
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
            "lease": _lease_row(db, work_id),
            "outcome": _outcome_row(db, work_id),
            "transcript": _transcript_rows(db, work_id),
        }
    finally:
        db.close()


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
            approval.approve(
                db, order["order_id"], actor=OPERATOR, digest=order["digest"], policy=POLICY
            )
            supplier.set_faults(delay_next=1, delay_seconds=REPLY_DELAY)
            turn = _HeldTurn(
                shop,
                lambda wdb: approval.execute(wdb, held, order["order_id"], client, policy=POLICY),
                lambda wdb: {
                    "send_again": _attempt(
                        lambda: approval.execute(
                            wdb, held, order["order_id"], client, policy=POLICY
                        )
                    ),
                    "completion": _attempt(
                        lambda: leases.finish(wdb, held, "DONE", {"ordered": True})
                    ),
                },
            )
            turn.start()
            wait_until(
                lambda: ledger_orders(supplier.database),
                timeout=DEADLINE,
                what="the supplier to accept the order",
            )
            at_cancel = approval.get_order(db, order["order_id"])["status"]
            cancelled = leases.cancel(
                db, work_id, actor=OPERATOR, policy=POLICY, reason="the customer called to cancel"
            )
            if not turn.ready.wait(DEADLINE):
                raise TimeoutError("the worker's send never returned")
            turn.release.set()
            report = turn.finish_within(DEADLINE)
            after_cancel = {
                "order": approval.get_order(db, order["order_id"])["status"],
                "account": approval.account(db),
            }
            unreachable = SupplierClient(
                _dead_endpoint(), identity=client.identity, timeout=CLIENT_TIMEOUT
            )
            while_unreachable = leases.reconcile(db, unreachable)
            after_unreachable = {
                "order": approval.get_order(db, order["order_id"])["status"],
                "account": approval.account(db),
            }
            reconciled = leases.reconcile(db, client)
            settled = approval.get_order(db, order["order_id"])
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
                "outcome": _outcome_row(db, work_id),
                "lease": _lease_row(db, work_id),
                "ledger": ledger_orders(supplier.database),
            }
        finally:
            db.close()


def _dead_endpoint() -> str:
    """An address nobody answers: a port that was free a moment ago."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


# ================================================================ Exercise 3


def observe_without_fence(
    db: sqlite3.Connection, held: Any, message: Any, *, now: float | None = None
) -> int:
    """A copy of ``observe`` with one fence removed: the holder check before the insert.

    Everything else is as the chapter's ``observe``: one immediate transaction, the writer's
    generation on the row, JSON only. ``now`` is accepted and, with the check gone, unused.
    """
    try:
        text = json.dumps(message, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the message must be JSON (no NaN or infinity): {error}") from None
    with immediate(db):
        # The fence that was here: assert_current(db, held, now)
        cursor = db.execute(
            "INSERT INTO transcript(work_id, generation, message) VALUES (?, ?, ?)",
            (held.work_id, held.generation, text),
        )
        return int(cursor.lastrowid)


def exercise_3_remove_one_fence(directory: Path) -> dict:
    """Remove one fence from a copy: the same stale write, through the copy and through ``observe``.

    Two fresh shops run one script in injected time (``now=``, so the expiry is exact and
    said so): claim, let the lease run out, reacquire as generation 2, write generation 2's
    row; then generation 1 comes back with a late transcript row and a completion. In the
    first shop the late row goes through ``observe_without_fence``; in the second through the
    chapter's ``observe``. Each shop ends with generation 2 finishing the work DONE: its
    outcome is the only one, as generation 1's completion is refused either way.

    Returns ``{"without_fence": ..., "with_fence": ...}``, each with ``shop``, ``work_id``,
    ``late_write`` and ``stale_completion`` (``''`` when the write went through, else
    ``'PermissionError: why'``).

    What it shows: fences are per write, not per worker. Removing the check from one write
    path lets a stale execution put a row into the transcript (generation 1 after generation
    2's, so whoever reads it next reads a conversation the live execution never had) even
    though ``finish`` still refuses the same claim. The completion being safe says nothing
    about the transcript. With the fence restored the same _attempt raises PermissionError and
    the row is absent from the table: a refusal you can read back, not a warning in a log.
    """
    leases = chapter()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "time": "injected with now=",
        "without_fence": _stale_transcript_write(
            leases, directory / "without-fence.db", observe_without_fence
        ),
        "with_fence": _stale_transcript_write(leases, directory / "with-fence.db", leases.observe),
    }


def _stale_transcript_write(
    leases: ModuleType, shop: Path, write: Callable[..., int]
) -> dict[str, Any]:
    db, queue = leases.open_worker_shop(shop)
    try:
        t0, ttl = 1_000_000.0, 30.0
        work_id = leases.enqueue(queue, "ex3-1", "session-a", "Is the pistachio nut-free?")
        old = leases.claim(db, OWNER, ttl=ttl, now=t0)
        new = leases.claim(db, OWNER, ttl=ttl, now=t0 + ttl + 0.001)
        leases.observe(
            db, new, {"role": "assistant", "text": "No: pistachio is a nut."}, now=t0 + ttl + 1
        )
        late = _attempt(
            lambda: write(
                db, old, {"role": "assistant", "text": "Yes, it is nut-free."}, now=t0 + ttl + 2
            )
        )
        completion = _attempt(
            lambda: leases.finish(db, old, "DONE", {"by": old.worker_id}, now=t0 + ttl + 2)
        )
        leases.finish(db, new, "DONE", {"by": new.worker_id}, now=t0 + ttl + 3)
        transcript = _transcript_rows(db, work_id)
        return {
            "shop": str(shop),
            "work_id": work_id,
            "generations": [old.generation, new.generation],
            "late_write": late,
            "stale_completion": completion,
            "transcript": transcript,
            "stale_rows": [row for row in transcript if row["generation"] != new.generation],
            "outcome": _outcome_row(db, work_id),
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
    same time, and both may spend. What stops the overspend is the ceiling check inside
    ``approve``'s own transaction: whichever approval takes the write lock first reserves its
    money, and the other finds the account already committed and is refused. Exactly one
    order is reserved and the account never exceeds its ceiling. A shared resource needs its
    own check at its own write, whatever locks the work.
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
        barrier.wait()  # both claim now
        barrier.wait()  # both hold their claims
        running = _rows(
            db,
            "SELECT w.work_id, w.session_id, l.worker_id, l.expires FROM work w"
            " JOIN assignment_leases l USING (work_id) WHERE w.state = 'running'"
            " ORDER BY w.work_id",
        )
        third = leases.claim(db, "till-3", ttl=30)
        barrier.wait()  # both approve now
        for thread in threads:
            thread.join(DEADLINE)
        for name, result in results.items():
            if isinstance(result.get("exception"), NotStarted):
                raise result["exception"]
            if "error" in result:
                raise RuntimeError(f"{name} failed: {result['error']}")
        orders = _rows(
            db,
            "SELECT order_id, work_id, amount_cents, status FROM assistant_orders"
            " ORDER BY order_id",
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
        result |= {"order_id": order["order_id"], "amount_cents": order["amount_cents"]}
        barrier.wait()
        result["approval"] = (
            _attempt(
                lambda: approval.approve(
                    db,
                    order["order_id"],
                    actor=OPERATOR,
                    digest=order["digest"],
                    policy=CEILING_POLICY,
                )
            )
            or "APPROVED"
        )
    except BaseException as error:  # noqa: BLE001 - reported to the parent thread
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
    of ``lease_renewals`` (see ``prepare_renewals``).
    """
    leases = chapter()
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, (int, float))
        or not math.isfinite(ttl)
        or not 0 < ttl <= MAX_TTL
    ):
        raise ValueError(f"ttl must be finite, above 0 and at most {MAX_TTL:g} seconds: {ttl!r}")
    if isinstance(progress, bool) or not isinstance(progress, int) or progress < 0:
        raise ValueError(f"progress is a whole number from 0: {progress!r}")
    if bound is not None and (
        isinstance(bound, bool)
        or not isinstance(bound, (int, float))
        or not math.isfinite(bound)
        or bound <= 0
    ):
        raise ValueError(f"bound is None or a finite number of seconds above 0: {bound!r}")
    now = time.time() if now is None else float(now)
    with immediate(db):
        leases.assert_current(db, held, now)
        last = db.execute(
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
        current = db.execute(
            "SELECT expires FROM assignment_leases WHERE work_id = ?", (held.work_id,)
        ).fetchone()
        expires = max(expires, current["expires"])
        db.execute(
            "UPDATE assignment_leases SET expires = ? WHERE work_id = ? AND generation = ?",
            (expires, held.work_id, held.generation),
        )
        db.execute(
            "INSERT INTO lease_renewals"
            "(work_id, generation, progress, progressed_at, renewed_at, expires)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (held.work_id, held.generation, progress, progressed_at, now, expires),
        )
    return dataclasses.replace(held, expires=expires)


class _Renewer(threading.Thread):
    """Renews ``held`` every ``interval`` seconds on its own connection, from the moment it
    starts (that first renewal marks where the turn began), until stopped or refused.

    ``progress`` is set by the turn as it goes. Every _attempt, granted or refused, is one line
    of ``log`` (flushed at once, so a SIGKILL loses none of them).
    """

    def __init__(
        self, shop: Path, held: Any, *, ttl: float, interval: float, bound: float | None, log: Path
    ) -> None:
        super().__init__(daemon=True)
        self.shop, self.held, self.ttl, self.interval, self.bound, self.log = (
            shop,
            held,
            ttl,
            interval,
            bound,
            log,
        )
        self.progress = 0
        self.stopped = threading.Event()
        self.refused: str | None = None

    def run(self) -> None:
        db = connect(self.shop)
        try:
            with self.log.open("a", encoding="utf-8") as log:
                tick = time.monotonic()
                while not self.stopped.is_set():
                    at, progress = time.time(), self.progress
                    try:
                        renewed = renew(
                            db, self.held, ttl=self.ttl, progress=progress, bound=self.bound, now=at
                        )
                        record = {
                            "at": at,
                            "granted": True,
                            "progress": progress,
                            "expires": renewed.expires,
                        }
                    except PermissionError as refused:
                        self.refused = str(refused)
                        record = {
                            "at": at,
                            "granted": False,
                            "progress": progress,
                            "refusal": str(refused),
                        }
                    log.write(json.dumps(record) + "\n")
                    log.flush()
                    if self.refused is not None:
                        return
                    tick = max(tick + self.interval, time.monotonic())
                    self.stopped.wait(max(0.0, tick - time.monotonic()))
        finally:
            db.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(DEADLINE)


SCAN_SECONDS = 0.05
RENEW_SHARE = 1 / 3  # the renewer runs every third of a lease
BOUND_FACTOR = 2.0  # the bound: twice the longest pilot turn, the safe lease without renewal
WINDOW_FACTOR = 2.0  # how long the unbounded hung turn is watched: twice the bound
PLANS = {
    "full": {"pilot": 20, "trials": 10, "detection": 10, "steps": 2, "max_tokens": 96},
    "quick": {"pilot": 4, "trials": 2, "detection": 2, "steps": 1, "max_tokens": 16},
}
ARMS = ("plain", "renewed", "bounded")
LOAD_SECONDS = phases.LOAD_SECONDS
TURN_SECONDS = phases.TURN_SECONDS


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

    Real model turns, real processes, real time. A pilot of real turns gives the median
    (the lease) and the maximum (the bound: twice it, which is also the safe lease without
    renewal). Then, with the experiment's replacement scanning every 50 ms: false expiry
    under the median lease for one worker process whose trials interleave three arms (no
    renewal, a renewing thread every third of the lease, the same bounded by progress);
    detection of a SIGKILLed renewing worker; and two hung turns (a step that never returns)
    whose renewers keep running, one unbounded and one bounded. ``out`` gets the receipt
    (the format ``lucyshop.lab.exercise_receipts`` describes and checks); ``workdir`` (an
    empty directory; default a temporary one) keeps the shops to read back.

    Returns a dict with ``receipt`` (its path), ``figures``, ``observations`` and ``shops``
    (with a ``workdir``: the directories ``false-expiry``, ``detection`` and ``hung``, each
    holding the ``shop.db`` its phase used, with ``lease_renewals``).

    What it shows: a renewing lease lets the lease be short without a live worker losing its
    work. At the median, a plain lease expires under about half of all turns; renewed every
    third of a lease, none, for one small transaction every third of a lease. And a crash is
    now noticed after about a lease less half a renewal interval, where without renewal the
    only safe lease was twice the longest turn. The cost is a new failure: the renewer is a
    separate thread, so it proves the process is alive, not that the turn is. A hung turn
    with an unbounded renewer keeps its lease for as long as the process lives, and no
    replacement ever takes the work. Tying renewal to progress (never more than the bound
    past the last step) fixes it: the bounded hung turn is taken over about a bound after
    its last progress, and the renewal after that is refused, not just late. The bound has a
    price of its own, which the bounded arm measures: progress is only seen between steps,
    so a live step slower than the bound is cut as if it had hung. The bound is a judgement
    about how slow a live step can be, made from the pilot; when the machine gets slower
    than the pilot was, that judgement is what fails.
    """
    leases = chapter()
    plan = PLANS["quick" if quick else "full"]
    started, load_start = time.time(), os.getloadavg()
    argv = ["5", *(["--quick"] if quick else []), "--out", str(out)]
    record = receipts.provenance(argv, started, load_start, module=str(HERE))
    seeds = {
        "pilot": seed,
        "trials": seed + 100_000,
        "kill_offsets": seed,
        "detection": [seed + 400_000 + 1_000 * n for n in range(plan["detection"])],
        "hung": {"unbounded": seed + 600_000, "bounded": seed + 600_001},
    }
    chat = open_model(backend, model, seed=seeds["pilot"])
    warm = warm_up(chat)
    with _bar(plan["pilot"], "5 pilot", progress) as bar:
        pilot = phases.pilot(chat, plan["pilot"], plan["max_tokens"], bar)
    main_model = describe(chat)
    del chat  # the workers load their own
    turns = [row["seconds"] for row in pilot]
    lease = leases.percentile(turns, 50)
    interval = lease * RENEW_SHARE
    bound = BOUND_FACTOR * leases.percentile(turns, 100)
    with _workdir(workdir, "ch13-exercise5-") as tmp, Children() as children:
        lab = phases.Lab(
            leases, chapter_path(), backend, model, plan["max_tokens"], SCAN_SECONDS, tmp, children
        )
        shape = (lease, interval, bound)
        with _bar(plan["trials"] * len(ARMS), "5 false expiry", progress) as bar:
            expiry = _renewal_trials(lab, shape, plan["trials"], seeds["trials"], bar)
        offsets = phases.kill_offsets(
            leases.percentile(turns, 50), plan["detection"], seeds["kill_offsets"]
        )
        with _bar(plan["detection"], "5 detection", progress) as bar:
            detection = _renewal_detection(lab, shape, offsets, seeds["detection"], bar)
        hung = _hung_turns(lab, shape, plan["steps"], seeds["hung"])
    observations = {
        "warm_up": warm,
        "pilot": pilot,
        "false_expiry": expiry,
        "detection": detection,
        "hung": hung,
    }
    settings = {
        "backend": backend,
        "model": main_model,
        "max_tokens": plan["max_tokens"],
        "temperature": TEMPERATURE,
        "pilot_turns": plan["pilot"],
        "trials_per_arm": plan["trials"],
        "detection_trials": plan["detection"],
        "hung_steps": plan["steps"],
        "arms": list(ARMS),
        "scan_seconds": SCAN_SECONDS,
        "renew_share": RENEW_SHARE,
        "bound_factor": BOUND_FACTOR,
        "window_factor": WINDOW_FACTOR,
        "seed": seed,
        "seeds": seeds,
        "quick": quick,
        "impl": receipts.impl_record(chapter_path()),
        "answers": receipts.impl_record(HERE),
    }
    receipt = receipts.close(5, record, settings, observations, leases)
    receipts.write(Path(out), receipt)
    return {
        "receipt": str(out),
        "figures": receipt["figures"],
        "observations": observations,
        "settings": settings,
        "shops": {name: str(Path(workdir) / name) for name in ("false-expiry", "detection", "hung")}
        if workdir is not None
        else {},
    }


@contextlib.contextmanager
def _workdir(workdir: Path | None, prefix: str) -> Iterator[Path]:
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)
        return
    Path(workdir).mkdir(parents=True, exist_ok=True)
    yield Path(workdir)


def _bar(total: int, what: str, shown: bool) -> tqdm:
    return tqdm(total=total, desc=what, file=sys.stderr, dynamic_ncols=True, disable=not shown)


def _spawn(
    lab: phases.Lab,
    role: str,
    directory: Path,
    shape: tuple[float, float, float],
    seed: int,
    *extra: str,
) -> subprocess.Popen[Any]:
    """Start one of this file's worker roles in a child, with the reference blocked."""
    lease, interval, _bound = shape
    lab.spawned += 1
    argv = python_argv(
        str(HERE),
        "child",
        role,
        "--dir",
        str(directory),
        "--lease",
        repr(lease),
        "--interval",
        repr(interval),
        "--max-tokens",
        str(lab.max_tokens),
        "--backend",
        lab.backend,
        "--seed",
        str(seed),
        *(["--model", lab.model] if lab.model else []),
        *extra,
        blocked=True,
    )
    with (directory / f"{role}-{lab.spawned}.err").open("w") as stderr:
        return lab.children.spawn(
            argv, env=os.environ | {ENV: str(lab.impl)}, stdout=subprocess.DEVNULL, stderr=stderr
        )


def _shop(lab: phases.Lab, name: str) -> tuple[Path, sqlite3.Connection]:
    directory, db = lab.shop(name)
    prepare_renewals(db)
    return directory, db


def _renewals(db: sqlite3.Connection, work_id: int) -> list[dict[str, Any]]:
    return _rows(
        db,
        "SELECT generation, progress, progressed_at, renewed_at, expires FROM lease_renewals"
        " WHERE work_id = ? ORDER BY seq",
        work_id,
    )


def _attempts(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _renewal_trials(
    lab: phases.Lab, shape: tuple[float, float, float], trials: int, seed: int, bar: tqdm
) -> dict[str, list[dict[str, Any]]]:
    """One worker process runs every trial, the arms interleaved so drift in load hits all three."""
    lease, _interval, bound = shape
    directory, db = _shop(lab, "false-expiry")
    try:
        scanner = lab.start_replacement(directory, lease)
        schedule = [arm for _ in range(trials) for arm in ARMS]
        worker = _spawn(
            lab,
            "trials",
            directory,
            shape,
            seed,
            "--bound",
            repr(bound),
            "--arms",
            ",".join(schedule),
        )
        wait_for_file(directory / "ready-holder.json", timeout=LOAD_SECONDS, proc=worker)
        found = []
        for index in range(len(schedule)):
            found.append(
                wait_for_file(
                    directory / f"trial-{index}.json",
                    timeout=bound + lease + TURN_SECONDS,
                    proc=worker,
                )
            )
            bar.update()
        phases.expect_exit(worker, 0, "the renewing worker")
        takeovers = lab.stop_replacement(scanner, directory)
        by_arm: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
        for row in found:
            row["takeover"] = takeovers.pop(row["work_id"], None)
            row["outcome"] = phases.outcome(db, row["work_id"])
            row["renewals"] = _renewals(db, row["work_id"])
            row["attempts"] = _attempts(directory / f"renewals-{row['work_id']}.jsonl")
            by_arm[row["arm"]].append(row)
        if takeovers:
            raise RuntimeError(
                f"the replacement took over work no trial enqueued: {sorted(takeovers)}"
            )
        return by_arm
    finally:
        db.close()


def _renewal_detection(
    lab: phases.Lab,
    shape: tuple[float, float, float],
    offsets: Sequence[float],
    seeds: Sequence[int],
    bar: tqdm,
) -> list[dict[str, Any]]:
    """Per trial a fresh renewing worker is SIGKILLed ``offset`` seconds after its claim."""
    lease, _interval, bound = shape
    directory, db = _shop(lab, "detection")
    try:
        scanner = lab.start_replacement(directory, lease)
        found = []
        for trial, (offset, seed) in enumerate(zip(offsets, seeds, strict=True)):
            worker = _spawn(
                lab, "crash", directory, shape, seed, "--bound", repr(bound), "--trial", str(trial)
            )
            claimed = wait_for_file(
                directory / f"claimed-{trial}.json", timeout=LOAD_SECONDS, proc=worker
            )
            time.sleep(max(0.0, claimed["claimed_at"] + offset - time.time()))
            if worker.poll() is not None:
                raise RuntimeError(f"the worker of detection trial {trial} exited before its kill")
            killed_at = time.time()
            worker.send_signal(signal.SIGKILL)
            status = wait_exit(worker, timeout=phases.EXIT_SECONDS)
            took = wait_for_file(
                directory / f"takeover-{claimed['work_id']}.json",
                timeout=lease + TURN_SECONDS,
                proc=scanner,
            )
            found.append(
                claimed
                | {
                    "trial": trial,
                    "seed": seed,
                    "planned_offset": offset,
                    "killed_at": killed_at,
                    "exit_status": status,
                    "turns": phases.turns_of(directory / f"turns-{trial}.jsonl"),
                    "renewals": _renewals(db, claimed["work_id"]),
                    "takeover": took,
                }
            )
            bar.update()
        lab.stop_replacement(scanner, directory)
        return found
    finally:
        db.close()


def _hung_turns(
    lab: phases.Lab, shape: tuple[float, float, float], steps: int, seeds: dict[str, int]
) -> dict[str, dict[str, Any]]:
    """Two workers in one shop make ``steps`` steps and then hang; one renewer is unbounded."""
    lease, _interval, bound = shape
    window = WINDOW_FACTOR * bound
    directory, db = _shop(lab, "hung")
    try:
        scanner = lab.start_replacement(directory, lease)
        procs = {
            "unbounded": _spawn(
                lab,
                "hung",
                directory,
                shape,
                seeds["unbounded"],
                "--name",
                "unbounded",
                "--steps",
                str(steps),
            ),
            "bounded": _spawn(
                lab,
                "hung",
                directory,
                shape,
                seeds["bounded"],
                "--name",
                "bounded",
                "--steps",
                str(steps),
                "--bound",
                repr(bound),
            ),
        }
        hung = {
            name: wait_for_file(
                directory / f"hung-{name}.json",
                timeout=LOAD_SECONDS + steps * TURN_SECONDS,
                proc=proc,
            )
            for name, proc in procs.items()
        }
        takeover_file = {
            name: directory / f"takeover-{hung[name]['work_id']}.json" for name in hung
        }
        bounded_took = wait_for_file(
            takeover_file["bounded"], timeout=bound + lease + DEADLINE, proc=scanner
        )
        window_end = hung["unbounded"]["hung_at"] + window
        time.sleep(max(0.0, window_end - time.time()))
        checked_at = time.time()
        in_window = (
            json.loads(takeover_file["unbounded"].read_text())
            if takeover_file["unbounded"].exists()
            else None
        )
        expires_at_check = _lease_row(db, hung["unbounded"]["work_id"])["expires"]
        killed = {}
        for name in ("unbounded", "bounded"):
            killed[name] = time.time()
            procs[name].send_signal(signal.SIGKILL)
            wait_exit(procs[name], timeout=phases.EXIT_SECONDS)
        unbounded_took = wait_for_file(
            takeover_file["unbounded"], timeout=lease + DEADLINE, proc=scanner
        )
        lab.stop_replacement(scanner, directory)
        result = {}
        for name, took in (("unbounded", unbounded_took), ("bounded", bounded_took)):
            work_id = hung[name]["work_id"]
            result[name] = {
                "hung": hung[name],
                "bound": None if name == "unbounded" else bound,
                "killed_at": killed[name],
                "takeover": took,
                "outcome": phases.outcome(db, work_id),
                "renewals": _renewals(db, work_id),
                "attempts": _attempts(directory / f"renewals-{work_id}.jsonl"),
            }
        result["unbounded"] |= {
            "window": window,
            "checked_at": checked_at,
            "takeover_by_check": in_window,
            "lease_expires_at_check": expires_at_check,
        }
        return result
    finally:
        db.close()


# ---------------------------------------------------------------- exercise 5's child processes


def _child_trials(args: argparse.Namespace, leases: ModuleType) -> int:
    """Each scheduled trial: enqueue and claim one item, run one real turn (with the arm's
    renewer alongside), stop the renewer, finish; report the trial to ``trial-N.json``."""
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(directory / SHOP)
    chat = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(chat)
    write_ready(directory / "ready-holder.json", {"pid": os.getpid(), "warm_up": warm})
    for index, arm in enumerate(args.arms.split(",")):
        kind = kind_of(index)
        held = take_new_work(leases, db, queue, directory, f"{arm}-{index}", kind, args.lease)
        renewer = None
        if arm != "plain":
            renewer = _Renewer(
                directory / SHOP,
                held,
                ttl=args.lease,
                interval=args.interval,
                bound=args.bound if arm == "bounded" else None,
                log=directory / f"renewals-{held.work_id}.jsonl",
            )
            renewer.start()
        turn_started = time.time()
        reply = chat.chat(turn_messages(kind), max_tokens=args.max_tokens)
        turn_ended = time.time()
        if renewer is not None:
            renewer.stop()
        result = {"by": held.worker_id, "tokens": reply.tokens}
        refusal = _attempt(lambda held=held, result=result: leases.finish(db, held, "DONE", result))
        if refusal:
            wait_finished(queue, held.work_id, timeout=args.lease + DEADLINE)
        write_ready(
            directory / f"trial-{index}.json",
            {
                "trial": index,
                "arm": arm,
                "kind": kind,
                "work_id": held.work_id,
                "generation": held.generation,
                "lease": args.lease,
                "claimed_at": lease_start(held, args.lease),
                "expires": held.expires,
                "turn_started": turn_started,
                "turn_ended": turn_ended,
                "turn_seconds": reply.seconds,
                "tokens": reply.tokens,
                "finish_at": time.time(),
                "finish": "refused" if refusal else "accepted",
                "refusal": refusal or None,
                "renewer_refused": None if renewer is None else renewer.refused,
            },
        )
    return 0


def _child_crash(args: argparse.Namespace, leases: ModuleType) -> int:
    """Claim one item, renew it (bounded) and run real turns back to back until SIGKILLed."""
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(directory / SHOP)
    chat = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(chat)
    held = take_new_work(
        leases, db, queue, directory, f"detect-{args.trial}", kind_of(args.trial), args.lease
    )
    renewer = _Renewer(
        directory / SHOP,
        held,
        ttl=args.lease,
        interval=args.interval,
        bound=args.bound,
        log=directory / f"renewals-{held.work_id}.jsonl",
    )
    renewer.start()
    deadline = time.time() + DEADLINE + args.lease
    with (directory / f"turns-{args.trial}.jsonl").open("a", encoding="utf-8") as log:
        number = 0
        while time.time() < deadline:
            kind = kind_of(args.trial + number)
            _line(log, {"turn": number, "kind": kind, "started": time.time()})
            if number == 0:
                write_ready(
                    directory / f"claimed-{args.trial}.json",
                    {
                        "pid": os.getpid(),
                        "work_id": held.work_id,
                        "generation": held.generation,
                        "lease": args.lease,
                        "interval": args.interval,
                        "claimed_at": lease_start(held, args.lease),
                        "expires": held.expires,
                        "warm_up": warm,
                    },
                )
            reply = chat.chat(turn_messages(kind), max_tokens=args.max_tokens)
            _line(
                log,
                {
                    "turn": number,
                    "ended": time.time(),
                    "seconds": reply.seconds,
                    "tokens": reply.tokens,
                },
            )
            number += 1
            renewer.progress = number
    return 1  # the parent kills this process long before


def _child_hung(args: argparse.Namespace, leases: ModuleType) -> int:
    """Claim one item, renew it, make ``--steps`` real steps,
    then hang in a step that never returns."""
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(directory / SHOP)
    chat = open_model(args.backend, args.model, seed=args.seed)
    warm_up(chat)
    held = take_new_work(leases, db, queue, directory, f"hung-{args.name}", kind_of(0), args.lease)
    renewer = _Renewer(
        directory / SHOP,
        held,
        ttl=args.lease,
        interval=args.interval,
        bound=args.bound,
        log=directory / f"renewals-{held.work_id}.jsonl",
    )
    renewer.start()
    steps = []
    for step in range(args.steps):
        reply = chat.chat(turn_messages(kind_of(step)), max_tokens=args.max_tokens)
        steps.append(
            {"step": step, "ended": time.time(), "seconds": reply.seconds, "tokens": reply.tokens}
        )
        renewer.progress = step + 1
    write_ready(
        directory / f"hung-{args.name}.json",
        {
            "pid": os.getpid(),
            "work_id": held.work_id,
            "generation": held.generation,
            "claimed_at": lease_start(held, args.lease),
            "steps": steps,
            "progress": args.steps,
            "hung_at": time.time(),
        },
    )
    threading.Event().wait(DEADLINE * 10)  # the step that never returns (the parent kills us)
    return 1


def _line(log: Any, record: dict[str, Any]) -> None:
    log.write(json.dumps(record) + "\n")
    log.flush()


# ================================================================ Exercise 6

RECOVERY_PLANS = {
    "full": {"samples": 20, "max_tokens": 256},
    "quick": {"samples": 1, "max_tokens": 128},
}
OLLAMA_MODELS = ("qwen2.5:0.5b", "qwen2.5:1.5b")


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

    First the records are made for real: a shop whose worker sent the order to a real
    supplier process that committed it and lost the reply, so the shop's row says UNKNOWN
    with its money reserved, and the supplier's ledger holds the order. Then each model
    answers the experiment's crashed transcript (its recovery phase, unchanged) and the same
    transcript with the records in its last message: the operation key, its UNKNOWN status
    and the lookup-first rule, all read from that row. Same seeds, same tools
    (``place_order``, ``lookup_order(operation)``). Models: ``backend`` with ``models`` (None:
    its default), and, with ``ollama``, the qwen2.5 models of an Ollama server if one
    answers. Counts: placed again, looked up with the right key, neither. ``out`` gets the
    receipt (the format ``lucyshop.lab.exercise_receipts`` describes and checks).

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
    leases = chapter()
    plan = RECOVERY_PLANS["quick" if quick else "full"]
    started, load_start = time.time(), os.getloadavg()
    argv = ["6", *(["--quick"] if quick else []), "--out", str(out)]
    record = receipts.provenance(argv, started, load_start, module=str(HERE))
    with _workdir(workdir, "ch13-exercise6-") as tmp:
        records = _crashed_records(leases, tmp / "records")
    operation = records["order"]["operation"]
    if operation != OPERATION:
        raise RuntimeError(f"the shop's operation {operation} is not the experiment's {OPERATION}")
    plain = crashed_transcript(operation)
    given = _records_transcript(records["order"])
    chosen = [(backend, name) for name in (models or [None])]
    skipped = None
    if ollama and backend == "embedded":
        found, skipped = _ollama_models(OLLAMA_MODELS)
        chosen += [("ollama", name) for name in found]
    sampled: dict[str, Any] = {}
    with _bar(2 * plan["samples"] * len(chosen), "6 recovery", progress) as bar:
        for number, (which, name) in enumerate(chosen):
            model_seed = seed + 500_000 + 10_000 * number
            without = phases.recovery(
                which, name, model_seed, plan["samples"], plan["max_tokens"], bar
            )
            with_records = _sample_transcript(
                which, name, model_seed, given, plan["samples"], plan["max_tokens"], bar
            )
            sampled[without["name"]] = {k: v for k, v in without.items() if k != "samples"} | {
                "backend": which,
                "plain": without["samples"],
                "records": with_records,
            }
    observations = {
        "operation": operation,
        "records": records,
        "tools": RECOVERY_TOOLS,
        "messages": {"plain": plain, "records": given},
        "models": sampled,
    }
    settings = {
        "backend": backend,
        "models": list(sampled),
        "ollama": {"host": _ollama_host(), "skipped": skipped},
        "samples": plan["samples"],
        "max_tokens": plan["max_tokens"],
        "temperature": TEMPERATURE,
        "seed": seed,
        "seeds": {name: sampled[name]["seed"] for name in sampled},
        "quick": quick,
        "impl": receipts.impl_record(chapter_path()),
        "answers": receipts.impl_record(HERE),
    }
    receipt = receipts.close(6, record, settings, observations, leases)
    receipts.write(Path(out), receipt)
    return {
        "receipt": str(out),
        "figures": receipt["figures"],
        "observations": observations,
        "settings": settings,
        "shop": records["shop"] if workdir is not None else None,
        "ledger_file": records["ledger_file"] if workdir is not None else None,
    }


def _crashed_records(leases: ModuleType, directory: Path) -> dict[str, Any]:
    """A worker sends the order; the supplier commits it and drops the reply; the worker stops
    there. Returns the order as the shop records it and the ledger as the supplier does."""
    directory.mkdir(parents=True, exist_ok=True)
    shop = directory / "shop.db"
    with supplier_process(directory / "supplier", identity=SUPPLIER) as supplier:
        supplier.set_faults(drop_next=1)
        db, queue = leases.open_worker_shop(shop)
        try:
            work_id = leases.enqueue(
                queue,
                "records-1",
                "session-a",
                "Please order six tubs of vanilla (sku vanilla-tub) for the weekend.",
            )
            held = leases.claim(db, OWNER, ttl=30)
            order = approval.propose(db, held, supplier=SUPPLIER, proposal=VANILLA)
            approval.approve(
                db, order["order_id"], actor=OPERATOR, digest=order["digest"], policy=POLICY
            )
            sent = approval.execute(
                db, held, order["order_id"], supplier.client(timeout=2.0), policy=POLICY
            )
            row = approval.get_order(db, order["order_id"])
            return {
                "shop": str(shop),
                "ledger_file": str(supplier.database),
                "work_id": work_id,
                "worker_id": held.worker_id,
                "send_result": sent,
                "order": {
                    k: row[k]
                    for k in (
                        "order_id",
                        "operation",
                        "supplier",
                        "proposal",
                        "amount_cents",
                        "status",
                    )
                },
                "account": approval.account(db),
                "ledger": ledger_orders(supplier.database),
            }
        finally:
            db.close()


def _records_message(order: dict[str, Any]) -> str:
    """What the shop's records say about the order, and the rule, as the replacement reads them."""
    proposal = (
        json.loads(order["proposal"]) if isinstance(order["proposal"], str) else order["proposal"]
    )
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


def _records_transcript(order: dict[str, Any]) -> list[dict]:
    """The experiment's crashed transcript with the records in its last message."""
    messages = crashed_transcript(order["operation"])
    return [*messages[:-1], {"role": "user", "content": _records_message(order)}]


def _sample_transcript(
    backend: str,
    model: str | None,
    seed: int,
    messages: list[dict],
    samples: int,
    max_tokens: int,
    bar: tqdm,
) -> list[dict[str, Any]]:
    """``samples`` replies to ``messages``, exactly as the experiment's recovery phase samples
    its crashed transcript (same model opening, same seed, same tools, same _rows)."""
    chat = open_model(backend, model, seed=seed)
    found = []
    for _ in range(samples):
        reply = chat.chat(messages, RECOVERY_TOOLS, max_tokens=max_tokens)
        found.append(
            {
                "text": reply.text,
                "tokens": reply.tokens,
                "seconds": reply.seconds,
                "calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
            }
        )
        bar.update()
    return found


def _ollama_host() -> str:
    return os.environ.get("OLLAMA_HOST") or OLLAMA_HOST


def _ollama_models(wanted: Sequence[str]) -> tuple[list[str], str | None]:
    """The ``wanted`` models an Ollama server has, or ``[]`` and why not."""
    try:
        import ollama

        listed = ollama.Client(host=_ollama_host(), timeout=3).list()
    except Exception as error:  # noqa: BLE001 - no server is an ordinary answer here
        return [], f"no Ollama server answered at {_ollama_host()} ({type(error).__name__})"
    names = {entry.model for entry in listed.models}
    found = [name for name in wanted if name in names]
    missing = [name for name in wanted if name not in names]
    return found, (f"the server lacks {', '.join(missing)}" if missing else None)


# ================================================================ command line

EXERCISES: dict[str, Callable[..., dict]] = {
    "1": exercise_1_reuse_owner_label,
    "2": exercise_2_cancel_while_delayed,
    "3": exercise_3_remove_one_fence,
    "4": exercise_4_sessions_vs_ceiling,
    "5": exercise_5_renewal,
    "6": exercise_6_records,
}
RECEIPTS = {
    "5": "evidence/ch13-exercise5-renewal-receipt.json",
    "6": "evidence/ch13-exercise6-records-receipt.json",
}
CHILD_ROLES = {"trials": _child_trials, "crash": _child_crash, "hung": _child_hung}


def _what_it_shows(function: Callable[..., Any]) -> str:
    text = (function.__doc__ or "").split("What it shows:", 1)[-1]
    return " ".join(text.split())


def _child_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="exercises.py child")
    parser.add_argument("role", choices=sorted(CHILD_ROLES))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--lease", type=float, required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--bound", type=float)
    parser.add_argument("--arms", default="")
    parser.add_argument("--trial", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--name", default="")
    parser.add_argument("--backend", default="embedded")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args(argv)
    return CHILD_ROLES[args.role](args, chapter())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["child"]:
        return _child_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python solutions/exercises.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("exercise", choices=[*EXERCISES, "check"])
    parser.add_argument(
        "receipt", nargs="?", type=Path, help="with check: the receipt to recompute"
    )
    parser.add_argument(
        "--dir", type=Path, help="exercises 1-4: where the shops go (default: a temporary one)"
    )
    parser.add_argument(
        "--out", type=Path, help="exercises 5-6: the receipt (default: evidence/...)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="exercises 5-6: a few samples, short turns"
    )
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    if args.exercise == "check":
        if args.receipt is None:
            parser.error("check needs the receipt's path")
        problems = receipts.check_receipt(args.receipt, chapter())
        for problem in problems:
            print(f"FAIL  {problem}")
        print(f"receipt check {'FAILED' if problems else 'passed'}: {args.receipt}")
        return 1 if problems else 0
    function = EXERCISES[args.exercise]
    try:
        if args.exercise in RECEIPTS:
            out = args.out or Path(RECEIPTS[args.exercise])
            result = function(out, quick=args.quick, seed=args.seed, progress=True)
            print("\n".join(receipts.headline(json.loads(Path(out).read_text()))))
        elif args.dir is not None:
            result = function(args.dir)
            print(json.dumps(result, indent=1, default=str))
        else:
            with tempfile.TemporaryDirectory(prefix=f"ch13-exercise{args.exercise}-") as tmp:
                result = function(Path(tmp))
                print(json.dumps(result, indent=1, default=str))
    except NotStarted as stub:
        print(f"NOT STARTED  exercise {args.exercise}: {stub}")
        return 3
    print(f"\nWhat it shows: {_what_it_shows(function)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
