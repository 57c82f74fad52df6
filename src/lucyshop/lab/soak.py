"""``make soak``: a seeded chaos soak of a chapter-13 implementation, with real processes.

    python -m lucyshop.lab.soak [--seconds 120] [--seed 13] [--impl solutions]
                                [--workers 4] [--items 400] [--lease 1.5] [--keep] [--report FILE]

What runs, all on this machine:

* one supplier process (chapter 12) that drops the reply after committing, or delays it past
  the client's timeout, at seeded random;
* ``--workers`` worker processes, each looping claim -> observe -> propose -> approve ->
  execute -> finish over a queue of ``--items`` assignments in several sessions, with a real
  lease of ``--lease`` seconds and a supplier timeout shorter than it;
* a chaos loop that, on a schedule drawn from the seed, SIGKILLs a worker, or SIGSTOPs one
  past its lease and SIGCONTs it later, and restarts killed workers as a service manager
  would (sometimes under the shared service name, so only generations tell them apart).

Then it drains: chaos stops, every paused worker is continued, the workers are ended where
they stand, ``recover_once`` (owner ``drain``) takes every unfinished assignment until it is
IDLE, and ``reconcile`` settles the uncertain orders. Last, it reads both SQLite files
directly (the shop and the supplier's ledger) and checks, naming the work ids on a failure:

1. every assignment finished exactly once, with exactly one outcome row;
2. the supplier ledger holds one order per accepted operation (and per rejected one), none
   the shop does not know, no operation twice, no assignment with two orders;
3. spent cents equal the accepted amounts, in the shop and in the ledger; reserved cents
   equal what is still uncertain (zero after reconcile, unless the supplier never saw it);
4. no transcript row or outcome was written by a generation that did not hold the running
   work's lease at that moment;
5. every stale write was refused by the fence: with PermissionError (not by a constraint
   or a crash), including the writes a superseded worker attempts on purpose, and no supplier
   send by a generation that had been superseded before its ``execute`` began;
6. each claim advanced the lease generation by exactly one.

The proof that no superseded generation wrote is kept in the shop file itself: before any
worker starts, the soak adds history tables and triggers (``soak_*``) that record, inside
the very transaction of every transcript and outcome insert, the lease generation current at
that moment, and every lease row each claim wrote. Workers also append what they attempted
(each write, its generation, accepted or refused, with times) to their own JSON-lines log.

The seed fixes the chaos schedule (when, what, which worker slot), the supplier's faults and
the workers' pauses between steps; process timing is the machine's, so two runs of one seed
differ in detail but never in what must hold.

Exit status: 0 every invariant held, 1 one failed, 3 the implementation is still a stub.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucyshop import approval
from lucyshop.lab.loader import (
    ImplementationError,
    ReferenceBlocked,
    block_for,
    impl_path,
    load_impl,
)
from lucyshop.lab.processes import Children, python_argv
from lucyshop.lab.stubs import NotStarted
from lucyshop.lab.suppliers import supplier_process
from lucyshop.supplier import SupplierClient, ledger_orders

OPERATOR = "lucy"
SERVICE = "lucy-worker"  # the shared service name a restarted worker may come back under
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
REJECTED_SKU = (
    "durian-tub"  # the supplier answers REJECTED for this one: the other conclusive answer
)
MAX_ORDER_CENTS = 5 * 250
DROP_RATE, DELAY_RATE = 0.08, 0.08
CHAOS_EVERY = 1.5  # mean seconds between chaos events
PAUSE_SHARE = 0.4  # share of chaos events that are pauses (the rest are kills)
CLOCK_SLACK = 0.002  # SQLite's 'now' has millisecond resolution
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


# ------------------------------------------------------------------ the history the proof needs

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


# ------------------------------------------------------------------ the worker process


class Log:
    """One worker process's observations, one JSON object a line, each line one ``write``."""

    def __init__(self, path: str | Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **fields: Any) -> None:
        os.write(self._fd, (json.dumps(fields, sort_keys=True, default=str) + "\n").encode())


class LoggedSupplier:
    """The real client, noting every send (before it leaves) with the generation that sent it."""

    def __init__(self, client: SupplierClient, log: Log) -> None:
        self.client, self.log = client, log
        self.identity, self.timeout = client.identity, client.timeout
        self.current: tuple[int, int, float] | None = None  # work id, generation, execute started

    def lookup(self, operation: str) -> dict[str, Any] | None:
        return self.client.lookup(operation)

    def order(self, operation: str, proposal: dict[str, Any]) -> dict[str, Any]:
        work_id, generation, started = self.current or (None, None, None)
        self.log.write(
            e="send", work_id=work_id, gen=generation, t_exec=started, t=time.time(), op=operation
        )
        return self.client.order(operation, proposal)


REFUSED = object()


class Turn:
    """One claimed assignment, carried through every step; each fenced write is logged."""

    def __init__(
        self,
        leases: Any,
        db: sqlite3.Connection,
        client: LoggedSupplier,
        log: Log,
        rng: random.Random,
        policy: approval.SpendingPolicy,
        held: Any,
        lease: float,
    ) -> None:
        self.leases, self.db, self.client, self.log = leases, db, client, log
        self.rng, self.policy, self.held, self.lease = rng, policy, held, lease
        self.order: dict[str, Any] | None = None

    def write(self, boundary: str, call: Callable[[], Any], *, probe: bool = False) -> Any:
        """Run one fenced write; log it accepted or refused (PermissionError);
        REFUSED if refused."""
        held, started = self.held, time.time()
        try:
            result = call()
        except PermissionError as refused:
            self.log.write(
                e="write",
                b=boundary,
                work_id=held.work_id,
                gen=held.generation,
                ok=False,
                probe=probe,
                t0=started,
                t1=time.time(),
                why=str(refused)[:300],
                lease_gen=self.lease_generation(),
            )
            return REFUSED
        self.log.write(
            e="write",
            b=boundary,
            work_id=held.work_id,
            gen=held.generation,
            ok=True,
            probe=probe,
            t0=started,
            t1=time.time(),
        )
        return result

    def lease_generation(self) -> int | None:
        row = self.db.execute(
            "SELECT generation FROM assignment_leases WHERE work_id = ?", (self.held.work_id,)
        ).fetchone()
        return None if row is None else row[0]

    def think(self, low: float, high: float) -> None:
        """A model turn or a tool call: a share of the lease, so a whole turn fits inside it."""
        time.sleep(self.rng.uniform(low, high) * self.lease)

    def run(self) -> None:
        leases, db, held = self.leases, self.db, self.held
        # Thinking takes at most half the lease before the send, so the send is admitted with
        # more lease left than the supplier's timeout; then a short reply before finishing.
        self.think(0.05, 0.25)
        message = {"role": "assistant", "text": f"working on: {held.text}", "by": held.worker_id}
        if self.write("transcript", lambda: leases.observe(db, held, message)) is REFUSED:
            return self.refused()
        order = self.write(
            "propose",
            lambda: approval.propose(
                db, held, supplier=self.client.identity, proposal=proposal_for(held.work_id)
            ),
        )
        if order is REFUSED:
            return self.refused()
        self.order = order
        if order["status"] == "DRAFT":
            try:  # the operator's act, not the worker's: it has no holder to fence
                approval.approve(
                    db,
                    order["order_id"],
                    actor=OPERATOR,
                    digest=order["digest"],
                    policy=self.policy,
                )
            except PermissionError as taken:  # another generation's turn approved it first
                self.log.write(
                    e="approve-skipped",
                    work_id=held.work_id,
                    gen=held.generation,
                    why=str(taken)[:300],
                )
        self.think(0.05, 0.25)
        receipt = self.execute()
        if receipt is REFUSED:
            return self.refused()
        self.think(0.02, 0.08)
        status = "BLOCKED" if receipt["status"] == "UNKNOWN" else "DONE"
        result = {
            "receipt": receipt["status"],
            "operation": receipt["operation"],
            "by": held.worker_id,
        }
        if self.write("completion", lambda: leases.finish(db, held, status, result)) is REFUSED:
            return self.refused()
        return None

    def execute(self, *, probe: bool = False) -> Any:
        held, order = self.held, self.order
        self.client.current = (held.work_id, held.generation, time.time())
        try:
            return self.write(
                "supplier",
                lambda: approval.execute(
                    self.db, held, order["order_id"], self.client, policy=self.policy
                ),
                probe=probe,
            )
        finally:
            self.client.current = None

    def refused(self) -> None:
        """Refused once: if a newer generation holds the work, try the other writes anyway.

        A careful worker stops here. A buggy one would carry on, so the soak does too,
        deliberately, once it knows it is superseded: every one of these must be refused.
        """
        current = self.lease_generation()
        if current is None or current <= self.held.generation:
            return
        leases, db, held = self.leases, self.db, self.held
        self.write(
            "transcript",
            lambda: leases.observe(db, held, {"role": "assistant", "text": "late"}),
            probe=True,
        )
        if self.order is not None:
            self.execute(probe=True)
        self.write(
            "completion",
            lambda: leases.finish(db, held, "DONE", {"by": held.worker_id}),
            probe=True,
        )


def worker_main(args: argparse.Namespace) -> int:
    """One worker process: claim and work until the stop file appears,
    its parent dies or time is up."""
    log = Log(args.log)
    leases = load_impl()
    db, _ = leases.open_worker_shop(args.shop)
    client = LoggedSupplier(
        SupplierClient(args.endpoint, identity=args.identity, timeout=args.timeout), log
    )
    policy = policy_for(args.items)
    rng = random.Random(args.worker_seed)
    stop, parent = Path(args.stop), args.parent
    deadline = time.monotonic() + args.max_seconds
    log.write(e="start", pid=os.getpid(), owner=args.owner, t=time.time())
    held = None
    try:
        while not stop.exists() and os.getppid() == parent and time.monotonic() < deadline:
            started = time.time()
            held = leases.claim(db, args.owner, ttl=args.lease)
            if held is None:
                time.sleep(rng.uniform(0.02, 0.06))
                continue
            log.write(
                e="claim",
                work_id=held.work_id,
                gen=held.generation,
                owner=held.owner,
                t0=started,
                t1=time.time(),
                expires=held.expires,
            )
            Turn(leases, db, client, log, rng, policy, held, args.lease).run()
            held = None
    except Exception as error:  # noqa: BLE001 - logged for the parent's verdict, then a crash exit
        log.write(
            e="error",
            type=type(error).__name__,
            message=str(error)[:500],
            work_id=getattr(held, "work_id", None),
            gen=getattr(held, "generation", None),
            where=traceback.format_exc(limit=4)[-1500:],
        )
        return 2
    log.write(e="stop", t=time.time())
    return 0


# ------------------------------------------------------------------ the parent: chaos


@dataclass
class Slot:
    """One supervised worker position: the process now in it and its history."""

    index: int
    proc: Any = None
    owner: str = ""
    starts: int = 0
    killed: bool = False
    paused_until: float | None = None
    restart_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Counts:
    kills: int = 0
    pauses: int = 0
    resumes: int = 0
    exited_while_paused: int = 0
    restarts: int = 0
    skipped: int = 0
    crashes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Config:
    seconds: float
    seed: int
    impl: Path
    impl_spec: str
    workers: int
    items: int
    lease: float
    chaos_every: float
    pause_share: float

    @property
    def timeout(self) -> float:
        """The supplier client's timeout: well inside the lease,
        as chapter 11's admission rule needs."""
        return round(min(0.4, self.lease / 3), 3)

    @property
    def delay_seconds(self) -> float:
        return round(self.timeout * 2, 3)  # a delayed reply always outlives the client's patience

    @property
    def sessions(self) -> int:
        return max(2, self.workers * 3)


def chaos_plan(config: Config) -> list[tuple[float, str, int, float]]:
    """(seconds after start, kill or pause, slot, extra) for the whole run, from the seed alone.

    ``extra`` is how far past its lease a pause lasts, or how long a killed worker's restart waits.
    """
    rng = random.Random(f"chaos:{config.seed}")
    plan, at = [], rng.uniform(0.5, 1.5)
    while at < config.seconds:
        action = "pause" if rng.random() < config.pause_share else "kill"
        plan.append((at, action, rng.randrange(config.workers), rng.uniform(0.3, 1.0)))
        at += min(max(rng.expovariate(1 / config.chaos_every), 0.2), 3 * config.chaos_every)
    return plan


class Soak:
    def __init__(self, config: Config, leases: Any, directory: Path) -> None:
        self.config, self.leases, self.dir = config, leases, directory
        self.logs = directory / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.shop = directory / "shop.db"
        self.stop = directory / "stop"
        self.counts = Counts()
        self.slots = [Slot(i) for i in range(config.workers)]
        self.enqueued = 0
        self.feeder_error: BaseException | None = None
        self.drain: dict[str, Any] = {}
        self.supplier_faults: dict[str, int] = {}
        self.policy = policy_for(config.items)
        self.facts: dict[str, Any] = {}

    # -- workers

    def start(self, children: Children, slot: Slot, supplier: Any) -> None:
        """Start the next process in ``slot``; two times in three under the shared service name."""
        rng = random.Random(f"owner:{self.config.seed}:{slot.index}:{slot.starts}")
        slot.owner = SERVICE if rng.random() < 2 / 3 else f"w{slot.index}.{slot.starts}"
        name = f"w{slot.index}.{slot.starts}"
        argv = python_argv(
            "lucyshop.lab.soak",
            "--worker",
            "--shop",
            str(self.shop),
            "--owner",
            slot.owner,
            "--endpoint",
            supplier.endpoint,
            "--identity",
            supplier.identity,
            "--timeout",
            str(self.config.timeout),
            "--lease",
            str(self.config.lease),
            "--items",
            str(self.config.items),
            "--log",
            str(self.logs / f"{name}.jsonl"),
            "--stop",
            str(self.stop),
            "--parent",
            str(os.getpid()),
            "--worker-seed",
            f"{self.config.seed}:{name}",
            "--max-seconds",
            str(self.config.seconds * 3 + 120),
            blocked=True,
        )
        env = os.environ | {"LEASES_IMPL": str(self.config.impl)}
        with open(self.logs / f"{name}.err", "wb") as stderr:
            slot.proc = children.spawn(argv, env=env, stderr=stderr)
        slot.starts += 1
        slot.killed, slot.paused_until, slot.restart_at = False, None, None

    def supervise(self, children: Children, supplier: Any, now: float, *, chaos: bool) -> None:
        """Continue pauses that are due, notice exits, restart what is due (a service manager)."""
        for slot in self.slots:
            if slot.paused_until is not None and now >= slot.paused_until:
                self.resume(slot)
            if slot.proc is not None and slot.restart_at is None and not slot.alive:
                if slot.paused_until is not None:  # it exited just as it was stopped
                    slot.paused_until = None
                    self.counts.exited_while_paused += 1
                if not slot.killed:
                    tail = _tail(self.logs / f"w{slot.index}.{slot.starts - 1}.err")
                    self.counts.crashes.append(
                        f"worker w{slot.index}.{slot.starts - 1} exited with status "
                        f"{slot.proc.returncode}" + (f": {tail}" if tail else "")
                    )
                delay = random.Random(f"restart:{self.config.seed}:{slot.index}:{slot.starts}")
                slot.restart_at = now + (delay.uniform(0.1, 0.5) if chaos else 0.0)
            if slot.restart_at is not None and now >= slot.restart_at:
                self.start(children, slot, supplier)
                self.counts.restarts += 1

    def resume(self, slot: Slot) -> None:
        if slot.alive:
            slot.proc.send_signal(signal.SIGCONT)
        slot.paused_until = None
        self.counts.resumes += 1

    def strike(self, now: float, action: str, first: int, extra: float) -> None:
        """One chaos event on the first eligible slot from ``first`` on (skipped if none is)."""
        running = [s for s in self.slots if s.alive and s.paused_until is None]
        order = self.slots[first:] + self.slots[:first]
        eligible = [s for s in order if s in running]
        if action == "pause" and len(running) < 2:
            eligible = []  # keep one worker going, or nobody could take the paused work over
        if not eligible:
            self.counts.skipped += 1
            return
        slot = eligible[0]
        if action == "kill":
            slot.killed = True
            slot.proc.send_signal(signal.SIGKILL)
            self.counts.kills += 1
        else:
            slot.proc.send_signal(signal.SIGSTOP)
            slot.paused_until = now + self.config.lease + extra
            self.counts.pauses += 1

    # -- the queue

    def feed(self, stop: threading.Event, started: float) -> None:
        """Admit the assignments as customers would: spread over the run, a small backlog at most.

        The backlog (three per worker) keeps workers busy, so chaos mostly strikes a worker in
        the middle of a turn; the spread keeps assignments coming until the end, so the drain
        inherits work in flight. When chaos stops, whatever is left is admitted at once.
        """
        try:
            db, queue = self.leases.open_worker_shop(self.shop)
            with closing(db):
                config = self.config
                backlog = config.workers * 3
                while self.enqueued < config.items:
                    elapsed = time.monotonic() - started
                    share = 1.0 if stop.is_set() else min(1.0, elapsed / config.seconds)
                    first = min(config.items, config.workers * 2)  # something for everyone at once
                    target = first + math.ceil((config.items - first) * share)
                    pending = db.execute(
                        "SELECT count(*) FROM work WHERE state = 'pending'"
                    ).fetchone()[0]
                    if not stop.is_set():
                        target = min(target, self.enqueued + max(0, backlog - pending))
                    while self.enqueued < target:
                        i = self.enqueued
                        self.leases.enqueue(
                            queue,
                            f"soak-{config.seed}-{i}",
                            f"session-{i % config.sessions}",
                            f"assignment {i} of soak {config.seed}",
                        )
                        self.enqueued += 1
                    stop.wait(0.1)
        except BaseException as error:  # noqa: BLE001 - reported as a failed invariant
            self.feeder_error = error

    def unfinished(self) -> int:
        with closing(_read_only(self.shop)) as db:
            return db.execute("SELECT count(*) FROM work WHERE state != 'finished'").fetchone()[0]

    # -- the whole run

    def run(self) -> list[Verdict]:
        config = self.config
        with (
            supplier_process(
                self.dir,
                identity=SUPPLIER,
                drop_rate=DROP_RATE,
                delay_rate=DELAY_RATE,
                delay_seconds=config.delay_seconds,
                seed=config.seed,
                reject_skus=(REJECTED_SKU,),
            ) as supplier,
            Children() as children,
        ):
            db, _ = self.leases.open_worker_shop(self.shop)
            try:
                install_history(db, config.items)
                self.chaos(children, supplier)
                self.drain_queue(children, supplier, db)
                self.supplier_faults = supplier.health()
            finally:
                db.close()
        return check(self)

    def chaos(self, children: Children, supplier: Any) -> None:
        config = self.config
        started = time.monotonic()
        stop = threading.Event()
        feeder = threading.Thread(target=self.feed, args=(stop, started), daemon=True)
        feeder.start()
        try:
            for slot in self.slots:
                self.start(children, slot, supplier)
            plan = chaos_plan(config)
            report_at = 10.0
            while (now := time.monotonic()) - started < config.seconds:
                elapsed = now - started
                while plan and plan[0][0] <= elapsed:
                    _, action, first, extra = plan.pop(0)
                    self.strike(now, action, first, extra)
                self.supervise(children, supplier, now, chaos=True)
                if elapsed >= report_at:
                    report_at += 10.0
                    c = self.counts
                    print(
                        f"  {elapsed:5.0f}s  enqueued {self.enqueued}/{config.items}, unfinished "
                        f"{self.unfinished()}, kills {c.kills}, pauses {c.pauses}, restarts "
                        f"{c.restarts}",
                        flush=True,
                    )
                time.sleep(0.02)
        finally:
            stop.set()
            feeder.join(timeout=30)
            for slot in self.slots:  # chaos is over: nobody stays stopped
                if slot.paused_until is not None:
                    self.resume(slot)

    def drain_queue(self, children: Children, supplier: Any, db: sqlite3.Connection) -> None:
        """End the workers where they stand; ``recover_once`` takes the rest, ``reconcile`` settles.

        Chaos is over and every paused worker was continued. The workers are then ended in
        the middle of whatever they were doing (SIGTERM, then SIGKILL after a grace period), as
        a shutdown would, so the drain's replacement inherits real leftovers: pending
        assignments, and claimed ones with approved, sending or uncertain orders.
        """
        started = time.monotonic()
        self.stop.write_text("stop\n")
        for slot in self.slots:
            if slot.alive:
                children.end(slot.proc)
        client = supplier.client(timeout=2.0)
        recoveries: Counter[str] = Counter()
        errors: list[str] = []
        deadline = time.monotonic() + self.config.lease + 30
        while (
            time.monotonic() < deadline
        ):  # until IDLE with nothing left: live leases are waited out
            try:
                recovery = self.leases.recover_once(
                    db, owner="drain", supplier=client, policy=self.policy
                )
            except Exception as error:  # noqa: BLE001 - the implementation's: reported, not fatal
                errors.append(f"recover_once raised {type(error).__name__}: {error}")
                if len(errors) >= 10:
                    break
                time.sleep(0.1)
                continue
            if recovery.status != "IDLE":
                recoveries[recovery.status] += 1
            elif not self.unfinished():
                recoveries["IDLE"] = 1
                break
            else:
                time.sleep(0.05)
        settled = 0
        for _ in range(3):
            try:
                report = self.leases.reconcile(db, client)
            except Exception as error:  # noqa: BLE001
                errors.append(f"reconcile raised {type(error).__name__}: {error}")
                continue
            settled += sum(1 for row in report if row["after"] != row["before"])
            if all(row["after"] != row["before"] for row in report):
                break
        self.drain |= {
            "seconds": round(time.monotonic() - started, 1),
            "recover_once": dict(recoveries),
            "reconciled": settled,
            "errors": errors,
        }


# ------------------------------------------------------------------ the verdict


@dataclass(frozen=True)
class Verdict:
    invariant: str
    ok: bool
    detail: str
    work_ids: tuple[int, ...] = ()


def _ids(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(sorted({int(v) for v in values if v is not None}))


def read_logs(directory: Path) -> list[dict[str, Any]]:
    """Every worker's observations; a line torn by a SIGKILL mid-write is skipped."""
    events = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append(event | {"log": path.stem})
    return events


def check(soak: Soak) -> list[Verdict]:
    """Read both files directly and judge every invariant; facts go into ``soak.facts``."""
    config = soak.config
    with closing(_read_only(soak.shop)) as db:
        work = {r["work_id"]: dict(r) for r in db.execute("SELECT work_id, state FROM work")}
        outcomes = Counter(r[0] for r in db.execute("SELECT work_id FROM outcomes"))
        statuses = Counter(r[0] for r in db.execute("SELECT status FROM outcomes"))
        orders = [dict(r) for r in db.execute("SELECT * FROM assistant_orders")]
        money = dict(
            db.execute("SELECT reserved_cents, spent_cents FROM spending_account").fetchone()
        )
        writes = [dict(r) for r in db.execute("SELECT * FROM soak_writes ORDER BY id")]
        history = [dict(r) for r in db.execute("SELECT * FROM soak_lease_history ORDER BY id")]
        transcript_rows = db.execute("SELECT count(*) FROM transcript").fetchone()[0]
    ledger = ledger_orders(soak.dir / f"{SUPPLIER}-ledger.sqlite")
    events = read_logs(soak.logs)
    verdicts = []

    # 1. every assignment finished exactly once, with exactly one outcome row
    audited = Counter(w["work_id"] for w in writes if w["kind"] == "outcome")
    bad = [
        w
        for w, row in work.items()
        if row["state"] != "finished" or outcomes[w] != 1 or audited[w] != 1
    ]
    bad += [w for w in outcomes if w not in work]
    problems = []
    if len(work) != config.items:
        problems.append(f"{len(work)} work rows for {config.items} assignments")
    if soak.feeder_error is not None:
        problems.append(
            f"admission failed: {type(soak.feeder_error).__name__}: {soak.feeder_error}"
        )
    problems += soak.drain.get("errors", [])
    if bad:
        problems.append(f"{len(bad)} not finished exactly once, with one outcome")
    verdicts.append(
        Verdict(
            "every assignment finished exactly once, with exactly one outcome row",
            not problems,
            "; ".join(problems)
            or f"{len(work)} of {config.items}, "
            + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
            _ids(bad),
        )
    )

    # 2. the supplier ledger: one order per accepted operation, none unknown, none twice
    shop_ops = {o["operation"]: o for o in orders}
    ledger_ops = Counter(r["operation"] for r in ledger)
    twice = [op for op, n in ledger_ops.items() if n > 1]
    unknown = [op for op in ledger_ops if op not in shop_ops]
    per_work = Counter(o["work_id"] for o in orders)
    mismatched = []
    for row in ledger:
        mine = shop_ops.get(row["operation"])
        if mine is not None and (
            mine["status"] != row["status"]
            or (row["status"] == "ACCEPTED" and mine["amount_cents"] != row["amount_cents"])
        ):
            mismatched.append(mine["work_id"])
    missing = [
        o["work_id"]
        for o in orders
        if o["status"] in ("ACCEPTED", "REJECTED") and o["operation"] not in ledger_ops
    ]
    problems = []
    if twice:
        problems.append(f"operations ordered twice: {twice[:5]}")
    if unknown:
        problems.append(f"{len(unknown)} ledger orders the shop does not know: {unknown[:5]}")
    if mismatched:
        problems.append(
            f"{len(mismatched)} orders whose shop status or amount disagrees with the ledger"
        )
    if missing:
        problems.append(f"{len(missing)} orders settled in the shop but absent from the ledger")
    if many := [w for w, n in per_work.items() if n > 1]:
        problems.append(f"{len(many)} assignments with more than one order")
    accepted = sum(1 for r in ledger if r["status"] == "ACCEPTED")
    verdicts.append(
        Verdict(
            "the supplier ledger holds one order per accepted operation"
            " and none the shop does not know",
            not problems,
            "; ".join(problems)
            or (
                f"{len(ledger)} orders ({accepted} accepted, {len(ledger) - accepted} rejected), "
                "each once"
            ),
            _ids(
                mismatched
                + missing
                + [w for w, n in per_work.items() if n > 1]
                + [shop_ops[op]["work_id"] for op in twice if op in shop_ops]
            ),
        )
    )

    # 3. money: spent = accepted amounts; reserved = what is still uncertain (zero after reconcile)
    accepted_cents = sum(o["amount_cents"] for o in orders if o["status"] == "ACCEPTED")
    ledger_cents = sum(r["amount_cents"] for r in ledger if r["status"] == "ACCEPTED")
    uncertain = [o for o in orders if o["status"] in ("SENDING", "UNKNOWN")]
    unsent = [o for o in orders if o["status"] == "APPROVED"]
    uncertain_cents = sum(o["amount_cents"] for o in uncertain)
    seen = [o for o in uncertain if o["operation"] in ledger_ops]
    problems = []
    if not money["spent_cents"] == accepted_cents == ledger_cents:
        problems.append(
            f"spent {money['spent_cents']}, accepted in the shop {accepted_cents}, "
            f"accepted in the ledger {ledger_cents}"
        )
    if money["reserved_cents"] != uncertain_cents:
        problems.append(f"reserved {money['reserved_cents']} but uncertain {uncertain_cents}")
    if seen:
        problems.append(f"{len(seen)} orders still uncertain although the supplier holds them")
    if unsent:
        problems.append(f"{len(unsent)} approved orders of finished work were never sent")
    verdicts.append(
        Verdict(
            "spent cents equal the accepted amounts; reserved cents equal what is still uncertain",
            not problems,
            "; ".join(problems)
            or f"spent {money['spent_cents']} = accepted {accepted_cents}; reserved "
            f"{money['reserved_cents']} = uncertain {uncertain_cents} ({len(uncertain)} orders"
            f"{' the supplier never saw' if uncertain else ''})",
            _ids(o["work_id"] for o in uncertain + unsent) if problems else (),
        )
    )

    # 4. no transcript row or outcome written by a generation after it was superseded
    stale_rows = [
        w
        for w in writes
        if w["written_generation"] != w["lease_generation"] or w["work_state"] != "running"
    ]
    problems = []
    if stale_rows:
        first = stale_rows[0]
        problems.append(
            f"{len(stale_rows)} rows, e.g. the {first['kind']} of work {first['work_id']} written "
            f"by generation {first['written_generation']} while the lease was at generation "
            f"{first['lease_generation']} and the work {first['work_state']}"
        )
    audited_rows = sum(1 for w in writes if w["kind"] == "transcript")
    if audited_rows != transcript_rows:
        problems.append(f"{transcript_rows} transcript rows but {audited_rows} witnessed")
    verdicts.append(
        Verdict(
            "no transcript row or outcome was written by a superseded generation",
            not problems,
            "; ".join(problems)
            or f"{audited_rows} transcript rows and {sum(audited.values())} outcomes, "
            "each written by the generation that held the lease, inside its transaction",
            _ids(w["work_id"] for w in stale_rows),
        )
    )

    # 5. every stale write was refused by the fence (PermissionError), and none went to the supplier
    first_of = defaultdict(dict)  # work id -> generation -> when its lease row was first written
    for row in history:
        first_of[row["work_id"]].setdefault(row["generation"], row["at"])
    late_sends = []
    for e in events:
        if e.get("e") == "send" and e.get("gen") is not None:
            newer = [
                at for g, at in first_of[e["work_id"]].items() if g is not None and g > e["gen"]
            ]
            if newer and e["t_exec"] > min(newer) + CLOCK_SLACK:
                late_sends.append(e)
    errors = [e for e in events if e.get("e") == "error"]
    # A probe is made only after the worker read a newer generation: it is stale for certain.
    probes = [e for e in events if e.get("e") == "write" and e["ok"] and e.get("probe")]
    problems = []
    if probes:
        e = probes[0]
        problems.append(
            f"{len(probes)} writes accepted from a claim already superseded, e.g. the "
            f"{e['b']} write of work {e['work_id']} by generation {e['gen']} ({e['log']})"
        )
    if late_sends:
        e = late_sends[0]
        problems.append(
            f"{len(late_sends)} supplier sends by a superseded generation, e.g. work "
            f"{e['work_id']} generation {e['gen']} ({e['log']})"
        )
    if errors:
        e = errors[0]
        problems.append(
            f"{len(errors)} writes failed with something other than PermissionError, e.g. "
            f"{e['type']}: {e['message']} (work {e['work_id']} generation {e['gen']}, {e['log']})"
        )
    if soak.counts.crashes:
        problems.append(
            f"{len(soak.counts.crashes)} worker crashes, e.g. {soak.counts.crashes[0][:400]}"
        )
    refused = [e for e in events if e.get("e") == "write" and not e["ok"]]
    verdicts.append(
        Verdict(
            "every stale write was refused by the fence",
            not problems,
            "; ".join(problems)
            or f"{len(refused)} refused, no stale write reached the database or the supplier",
            _ids([e["work_id"] for e in probes + late_sends + errors]),
        )
    )

    # 6. generations only grow, by one per claim
    jumps = []
    by_work = defaultdict(list)
    for row in history:
        by_work[row["work_id"]].append(row["generation"])
    for work_id, generations in by_work.items():
        if any(not isinstance(g, int) for g in generations) or generations != list(
            range(1, len(generations) + 1)
        ):
            jumps.append(work_id)
    verdicts.append(
        Verdict(
            "each claim advanced the lease generation by exactly one",
            not jumps,
            f"{len(jumps)} assignments whose generations were not 1, 2, 3, ..."
            if jumps
            else (
                f"{len(history)} claims, highest generation "
                f"{max((len(v) for v in by_work.values()), default=0)}"
            ),
            _ids(jumps),
        )
    )

    soak.facts = facts(soak, events, history, ledger, orders, money, statuses)
    return verdicts


def facts(
    soak: Soak,
    events: list[dict[str, Any]],
    history: list[dict[str, Any]],
    ledger: list[dict[str, Any]],
    orders: list[dict[str, Any]],
    money: dict[str, int],
    statuses: Counter,
) -> dict[str, Any]:
    """Every figure of the report, each counted from what this run observed."""
    refused = [e for e in events if e.get("e") == "write" and not e["ok"]]
    sends = [e for e in events if e.get("e") == "send"]
    owner_of_log = {e["log"]: e["owner"] for e in events if e.get("e") == "start"}
    holder = {(h["work_id"], h["generation"]): str(h["worker_id"]).split("#")[0] for h in history}
    same_owner = sum(
        1
        for e in refused
        if (e.get("lease_gen") or 0) > e["gen"]
        and holder.get((e["work_id"], e["lease_gen"])) == owner_of_log.get(e["log"])
    )
    c = soak.counts
    return {
        "seed": soak.config.seed,
        "seconds": soak.config.seconds,
        "workers": soak.config.workers,
        "items": soak.config.items,
        "sessions": soak.config.sessions,
        "lease": soak.config.lease,
        "supplier_timeout": soak.config.timeout,
        "impl": str(soak.config.impl),
        "kills": c.kills,
        "pauses": c.pauses,
        "resumes": c.resumes,
        "exited_while_paused": c.exited_while_paused,
        "restarts": c.restarts,
        "chaos_skipped": c.skipped,
        "crashes": len(c.crashes),
        "worker_processes": sum(s.starts for s in soak.slots),
        "claims": len(history),
        "takeovers": sum(1 for h in history if (h["generation"] or 0) > 1),
        "stale_writes_refused": len(refused),
        "stale_refused_by_boundary": dict(sorted(Counter(e["b"] for e in refused).items())),
        "stale_refused_superseded": sum(1 for e in refused if (e.get("lease_gen") or 0) > e["gen"]),
        "stale_probes": sum(1 for e in refused if e.get("probe")),
        "stale_refused_same_owner": same_owner,
        "writes_accepted": sum(1 for e in events if e.get("e") == "write" and e["ok"]),
        "replies_dropped": soak.supplier_faults.get("dropped"),
        "replies_delayed": soak.supplier_faults.get("delayed"),
        "sends": len(sends),
        "repeated_sends": len(sends) - len({e["op"] for e in sends}),
        "orders": len(ledger),
        "orders_accepted": sum(1 for r in ledger if r["status"] == "ACCEPTED"),
        "outcomes": dict(sorted(statuses.items())),
        "uncertain_left": sum(1 for o in orders if o["status"] in ("SENDING", "UNKNOWN")),
        "assignments_without_order": soak.config.items
        - len({o["work_id"] for o in orders if o["operation"] in {r["operation"] for r in ledger}}),
        "spent_cents": money["spent_cents"],
        "reserved_cents": money["reserved_cents"],
        "drain": soak.drain,
    }


# ------------------------------------------------------------------ the command


def _read_only(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, timeout=5)
    db.row_factory = sqlite3.Row
    return db


def _tail(path: Path, size: int = 600) -> str:
    try:
        return path.read_bytes()[-size:].decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def rerun_command(config: Config) -> str:
    words = [
        "python",
        "-m",
        "lucyshop.lab.soak",
        "--seconds",
        f"{config.seconds:g}",
        "--seed",
        str(config.seed),
        "--impl",
        config.impl_spec,
        "--workers",
        str(config.workers),
        "--items",
        str(config.items),
        "--lease",
        f"{config.lease:g}",
    ]
    if config.chaos_every != CHAOS_EVERY or config.pause_share != PAUSE_SHARE:
        words += [
            "--chaos-every",
            f"{config.chaos_every:g}",
            "--pause-share",
            f"{config.pause_share:g}",
        ]
    command = shlex.join(words)
    defaults = (config.impl_spec, config.workers, config.items, config.lease) == (
        "solutions",
        4,
        400,
        1.5,
    )
    if defaults and (config.chaos_every, config.pause_share) == (CHAOS_EVERY, PAUSE_SHARE):
        return f"make soak SOAK_SECONDS={config.seconds:g} SEED={config.seed}   (or: {command})"
    return command


def print_report(config: Config, f: dict[str, Any], verdicts: list[Verdict], took: float) -> None:
    by = ", ".join(f"{b} {n}" for b, n in f["stale_refused_by_boundary"].items())
    drain = f["drain"]
    print(
        f"seed {f['seed']}: {f['seconds']:g}s of chaos, {f['workers']} workers, {f['items']} "
        f"assignments in {f['sessions']} sessions, lease {f['lease']:g}s, supplier timeout "
        f"{f['supplier_timeout']:g}s"
    )
    gone = f", {f['exited_while_paused']} had exited" if f["exited_while_paused"] else ""
    print(
        f"chaos: kills {f['kills']}, pauses {f['pauses']} (continued {f['resumes']}{gone}), "
        f"restarts {f['restarts']}, worker processes {f['worker_processes']}, events skipped "
        f"{f['chaos_skipped']}"
    )
    print(
        f"leases: claims {f['claims']}, takeovers {f['takeovers']}, stale writes refused "
        f"{f['stale_writes_refused']} ({by or 'none'}; {f['stale_refused_superseded']} superseded, "
        f"{f['stale_refused_same_owner']} of them by the same owner label, "
        f"{f['stale_probes']} deliberate probes)"
    )
    print(
        f"supplier: replies dropped {f['replies_dropped']}, delayed {f['replies_delayed']}, worker "
        f"sends {f['sends']} ({f['repeated_sends']} repeats answered from the ledger), orders "
        f"{f['orders']} ({f['orders_accepted']} accepted)"
    )
    print(
        f"drain: {drain.get('seconds')}s, recover_once {drain.get('recover_once')}, reconcile "
        f"settled {drain.get('reconciled')}; outcomes {f['outcomes']}; spent {f['spent_cents']} "
        f"reserved {f['reserved_cents']} cents"
    )
    for v in verdicts:
        ids = (
            " (work ids "
            f"{', '.join(map(str, v.work_ids[:20]))}{' ...' if len(v.work_ids) > 20 else ''})"
            if v.work_ids and not v.ok
            else ""
        )
        print(f"{'PASS' if v.ok else 'FAIL'}  {v.invariant}: {v.detail}{ids}")
    failed = [v.invariant for v in verdicts if not v.ok]
    print(f"soak {'FAILED: ' + '; '.join(failed) if failed else 'passed'} ({took:.0f}s)")
    print(f"rerun: {rerun_command(config)}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.soak", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument(
        "--seconds", type=float, default=120.0, help="seconds of chaos (default 120)"
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--impl", default="solutions", help="learner, solutions or a path (default solutions)"
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--items", type=int, default=400, help="assignments in the queue (default 400)"
    )
    parser.add_argument(
        "--lease", type=float, default=1.5, help="the workers' real lease in seconds (default 1.5)"
    )
    parser.add_argument(
        "--chaos-every",
        type=float,
        default=CHAOS_EVERY,
        help=f"mean seconds between chaos events (default {CHAOS_EVERY:g})",
    )
    parser.add_argument(
        "--pause-share",
        type=float,
        default=PAUSE_SHARE,
        help=f"share of chaos events that are pauses (default {PAUSE_SHARE:g})",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the run's directory even when it passes"
    )
    parser.add_argument(
        "--report", type=Path, help="also write the figures and verdicts as JSON here"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for name in (
        "--shop",
        "--owner",
        "--endpoint",
        "--identity",
        "--log",
        "--stop",
        "--worker-seed",
    ):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    checks = (
        (math.isfinite(args.seconds) and 1 <= args.seconds <= 3600, "--seconds is from 1 to 3600"),
        (1 <= args.workers <= 16, "--workers is from 1 to 16"),
        (1 <= args.items <= 5000, "--items is from 1 to 5000"),
        (
            math.isfinite(args.lease) and 0.6 <= args.lease <= 10,
            "--lease is from 0.6 to 10 seconds",
        ),
        (
            math.isfinite(args.chaos_every) and 0.1 <= args.chaos_every <= 60,
            "--chaos-every is from 0.1 to 60",
        ),
        (0 <= args.pause_share <= 1, "--pause-share is from 0 to 1"),
    )
    for ok, message in checks:
        if not ok:
            parser.error(message)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        return worker_main(args)
    try:
        impl = impl_path(args.impl)
    except ImplementationError as unknown:
        print(f"soak: {unknown}", file=sys.stderr)
        return 2
    block_for(impl)
    config = Config(
        args.seconds,
        args.seed,
        impl,
        args.impl,
        args.workers,
        args.items,
        args.lease,
        args.chaos_every,
        args.pause_share,
    )
    try:
        leases = load_impl(impl)
    except ReferenceBlocked as blocked:
        print(f"FAIL  reference blocked: {blocked}")
        return 1
    signal.signal(signal.SIGTERM, _terminated)  # a kill from outside still ends every child
    directory = Path(tempfile.mkdtemp(prefix=f"ch13-soak-{args.seed}-"))
    print(
        f"soak of {impl} with seed {args.seed} for {args.seconds:g}s (run directory {directory})",
        flush=True,
    )
    started, verdicts, keep = time.monotonic(), [], args.keep
    try:
        try:
            leases.open_worker_shop(directory / "shop.db")[0].close()
        except NotStarted as stub:
            print(f"NOT STARTED  {stub}")
            return 3
        soak = Soak(config, leases, directory)
        verdicts = soak.run()
        print_report(config, soak.facts, verdicts, time.monotonic() - started)
        if args.report:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text(
                json.dumps(
                    soak.facts
                    | {
                        "passed": all(v.ok for v in verdicts),
                        "rerun": rerun_command(config),
                        "verdicts": [v.__dict__ | {"work_ids": list(v.work_ids)} for v in verdicts],
                    },
                    indent=2,
                    default=str,
                )
                + "\n"
            )
        keep = keep or not all(v.ok for v in verdicts)
        return 0 if all(v.ok for v in verdicts) else 1
    except KeyboardInterrupt:
        keep = True
        print(
            "\ninterrupted: every process this soak started has been ended\nrerun: "
            f"{rerun_command(config)}"
        )
        return 130
    except (
        SystemExit
    ) as stopped:  # SIGTERM: _terminated raised it, the with-blocks ended every child
        keep = True
        print(
            "\nterminated: every process this soak started has been ended\nrerun: "
            f"{rerun_command(config)}"
        )
        return int(stopped.code or 1)
    except NotStarted as stub:
        print(f"NOT STARTED  {stub}")
        return 3
    except Exception as error:  # noqa: BLE001 - the harness itself failed: say where, keep the evidence
        keep = True
        where = traceback.extract_tb(error.__traceback__)[-1]
        print(
            f"FAIL  the soak could not finish: {type(error).__name__}: {error}\n"
            f"      at {where.filename}:{where.lineno}\nrerun: {rerun_command(config)}"
        )
        return 1
    finally:
        if keep:
            print(f"kept for inspection: {directory} (shop.db, {SUPPLIER}-ledger.sqlite, logs/)")
        else:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
