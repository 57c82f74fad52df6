"""The soak's parent: a supplier, supervised workers, a seeded chaos schedule, and the drain.

The chaos loop kills or pauses workers on a schedule drawn from the seed and restarts killed
ones as a service manager would; a feeder admits assignments over the run. The drain then ends
the workers where they stand and lets ``recover_once`` and ``reconcile`` finish the queue.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import threading
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucyshop import IMPL_ENV
from lucyshop.lab.given.orders import OWNER
from lucyshop.lab.services.processes import SharedGroupChildren, python_argv
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.proof.soak.invariants import Evidence, read_evidence
from lucyshop.proof.soak.script import SCRIPT_SECONDS, Script
from lucyshop.proof.soak.shop import (
    REJECTED_SKU,
    SUPPLIER,
    install_history,
    patient,
    policy_for,
    read_only,
)
from lucyshop.store import BUSY_TIMEOUT_MS

DROP_RATE, DELAY_RATE = 0.08, 0.08
CHAOS_EVERY = 1.5  # mean seconds between chaos events
PAUSE_SHARE = 0.4  # share of chaos events that are pauses (the rest are kills)
PAUSE_EXTRA = (0.3, 1.0)  # a pause lasts the lease and this much more (seconds, seeded)
FEEDER_GRACE = 30.0  # how long chaos's end waits for the feeder's last admissions (seconds)


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
    """What the chaos loop did, and every worker exit it did not cause."""

    kills: int = 0
    pauses: int = 0
    resumes: int = 0
    exited_while_paused: int = 0
    restarts: int = 0
    skipped: int = 0
    crashes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Config:
    """One soak run's settings (the command line's, validated)."""

    seconds: float
    seed: int
    impl: Path
    impl_spec: str
    workers: int
    items: int
    lease: float
    chaos_every: float
    pause_share: float
    stale: tuple[str, ...] = ()  # boundaries of the scripted stale writes (soak.script)

    @property
    def timeout(self) -> float:
        """The supplier client's timeout: well inside the lease,
        as chapter 11's admission rule needs."""
        return round(min(0.4, self.lease / 3), 3)

    @property
    def delay_seconds(self) -> float:
        return round(self.timeout * 2, 3)  # a delayed reply always outlives the client's patience

    @property
    def most_items(self) -> int:
        """The most assignments the run may admit, and what its spending ceilings are sized for.

        A scripted stale write still pending when the work runs out needs one more turn to
        reach its boundary, so a scripted run may admit up to ``items`` more, one at a time
        (``Soak.chaos_goes_on``); an unscripted run admits ``items`` exactly."""
        return self.items * 2 if self.stale else self.items

    @property
    def sessions(self) -> int:
        return max(2, self.workers * 3)

    @property
    def busy_timeout_ms(self) -> int:
        """How long every write of this soak waits for SQLite's write lock. A worker paused in
        a write transaction holds the lock for its whole pause (the lease and up to a second
        more), and a waiter paused while it waits spends its own pause on its clock. So: the
        kit's own timeout, plus the longest pause once for every worker; a wait that outlasts
        that was not made by chaos, and fails the soak."""
        return BUSY_TIMEOUT_MS + round(1000 * self.workers * (self.lease + PAUSE_EXTRA[1]))


def chaos_plan(config: Config) -> list[tuple[float, str, int, float]]:
    """(seconds after start, kill or pause, slot, extra) for the whole run, from the seed alone.

    ``extra`` is how far past its lease a pause lasts, or how long a killed worker's restart waits.
    """
    rng = random.Random(f"chaos:{config.seed}")
    plan, at = [], rng.uniform(0.5, 1.5)
    while at < config.seconds:
        action = "pause" if rng.random() < config.pause_share else "kill"
        plan.append((at, action, rng.randrange(config.workers), rng.uniform(*PAUSE_EXTRA)))
        at += min(max(rng.expovariate(1 / config.chaos_every), 0.2), 3 * config.chaos_every)
    return plan


class Soak:
    """One run: the supplier and the workers under chaos, then the drain, then the evidence."""

    def __init__(self, config: Config, leases: Any, directory: Path) -> None:
        self.config, self.leases, self.dir = config, leases, directory
        self.logs = directory / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.shop = directory / "shop.db"
        self.stop = directory / "stop"
        self.counts = Counts()
        self.slots = [Slot(i) for i in range(config.workers)]
        self.enqueued = 0
        self.admitting = config.items  # raised, one at a time, while a scripted write waits
        self.feeder_error: BaseException | None = None
        self.drain: dict[str, Any] = {}
        self.supplier_faults: dict[str, int] = {}
        self.policy = policy_for(config.most_items)
        self.facts: dict[str, Any] = {}
        self.script = Script(directory / "breaks", self.shop, config.stale)

    # -- workers

    def start(self, children: SharedGroupChildren, slot: Slot, supplier: Any) -> None:
        """Start the next process in ``slot``; two times in three under the shared service name."""
        rng = random.Random(f"owner:{self.config.seed}:{slot.index}:{slot.starts}")
        slot.owner = OWNER if rng.random() < 2 / 3 else f"w{slot.index}.{slot.starts}"
        name = f"w{slot.index}.{slot.starts}"
        argv = python_argv(
            "lucyshop.proof.soak",
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
            str(self.config.most_items),
            "--log",
            str(self.logs / f"{name}.jsonl"),
            "--stop",
            str(self.stop),
            "--parent",
            str(os.getpid()),
            "--worker-seed",
            f"{self.config.seed}:{name}",
            "--max-seconds",
            str(self.config.seconds * 3 + 120 + (SCRIPT_SECONDS if self.config.stale else 0)),
            "--busy-timeout-ms",
            str(self.config.busy_timeout_ms),
            *(("--breaks", str(self.script.dir)) if self.config.stale else ()),
            blocked=True,
        )
        env = os.environ | {IMPL_ENV: str(self.config.impl)}
        with open(self.logs / f"{name}.err", "wb") as stderr:
            slot.proc = children.spawn(argv, env=env, stderr=stderr)
        slot.starts += 1
        slot.killed, slot.paused_until, slot.restart_at = False, None, None

    def supervise(
        self, children: SharedGroupChildren, supplier: Any, now: float, *, chaos: bool
    ) -> None:
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
        """One chaos event on the first eligible slot from ``first`` on (skipped if none is).
        A worker the script has stopped, or is letting make its stale write, is left be."""
        scripted = self.script.holding()
        running = [
            s
            for s in self.slots
            if s.alive and s.paused_until is None and s.proc.pid not in scripted
        ]
        order = self.slots[first:] + self.slots[:first]
        eligible = [s for s in order if s in running]
        if action == "pause" and len(running) < 2:
            eligible = []  # keep one worker going, or nobody could take the paused work over
        if not eligible:
            self.counts.skipped += 1
            return
        if action == "pause":  # a worker in mid-turn first: its resumed writes are stale ones
            eligible = sorted(eligible, key=lambda s: not self.holding(s))
        slot = eligible[0]
        if action == "kill":
            slot.killed = True
            slot.proc.send_signal(signal.SIGKILL)
            self.counts.kills += 1
        else:
            slot.proc.send_signal(signal.SIGSTOP)
            slot.paused_until = now + self.config.lease + extra
            self.counts.pauses += 1

    def holding(self, slot: Slot) -> bool:
        """Whether the slot's worker has claimed work it has not yet tried to finish (read from
        its own log), so that pausing it past its lease makes a stale writer for sure."""
        claimed = None
        try:
            lines = (self.logs / f"w{slot.index}.{slot.starts - 1}.jsonl").read_text().splitlines()
        except OSError:
            return False
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line being written
            if event.get("e") == "claim":
                claimed = event.get("work_id")
            elif (
                event.get("e") == "write"
                and event.get("b") == "completion"
                and (event.get("work_id") == claimed)
            ):
                claimed = None
        return claimed is not None

    # -- the queue

    def feed(self, stop: threading.Event, started: float) -> None:
        """Admit the assignments as customers would: spread over the run, a small backlog at most.

        The backlog (three per worker) keeps workers busy, so chaos mostly strikes a worker in
        the middle of a turn; the spread keeps assignments coming until the end, so the drain
        inherits work in flight. When chaos stops, whatever is left is admitted at once. It
        runs until then, so an assignment ``chaos_goes_on`` adds late is admitted too.
        """
        try:
            db, queue = self.leases.open_worker_shop(self.shop)
            patient(db, self.config.busy_timeout_ms)
            with closing(db):
                config = self.config
                backlog = config.workers * 3
                while self.enqueued < self.admitting or not stop.is_set():
                    elapsed = time.monotonic() - started
                    share = 1.0 if stop.is_set() else min(1.0, elapsed / config.seconds)
                    items = self.admitting
                    first = min(items, config.workers * 2)  # something for everyone at once
                    target = first + math.ceil((items - first) * share)
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
        except BaseException as error:  # noqa: BLE001 - recorded as a failed invariant
            self.feeder_error = error

    def unfinished(self) -> int:
        with closing(read_only(self.shop)) as db:
            return db.execute("SELECT count(*) FROM work WHERE state != 'finished'").fetchone()[0]

    # -- the whole run

    def run(self) -> Evidence:
        """Run chaos and the drain; return what both files and the logs hold afterwards."""
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
            SharedGroupChildren() as children,
        ):
            db, _ = self.leases.open_worker_shop(self.shop)
            patient(db, config.busy_timeout_ms)
            try:
                install_history(db, config.most_items)
                self.chaos(children, supplier)
                self.drain_queue(children, supplier, db)
                self.supplier_faults = supplier.health()
            finally:
                db.close()
        return read_evidence(
            self.shop,
            self.dir / f"{SUPPLIER}-ledger.sqlite",
            self.logs,
            items=self.admitting,
            harness=self.harness_problems(),
            crashes=self.counts.crashes,
        )

    def harness_problems(self) -> list[str]:
        """Failures of admission and of the drain: the first invariant names them."""
        problems = self.script.problems() + list(self.drain.get("errors", []))
        if self.feeder_error is not None:
            error = self.feeder_error
            problems.insert(0, f"admission failed: {type(error).__name__}: {error}")
        return problems

    def chaos(self, children: SharedGroupChildren, supplier: Any) -> None:
        config = self.config
        started = time.monotonic()
        stop = threading.Event()
        feeder = threading.Thread(target=self.feed, args=(stop, started), daemon=True)
        feeder.start()
        try:
            self.script.arm_next()
            for slot in self.slots:
                self.start(children, slot, supplier)
            plan = chaos_plan(config)
            progress_at = 10.0
            while self.chaos_goes_on((now := time.monotonic()) - started):
                elapsed = now - started
                while plan and plan[0][0] <= elapsed:
                    _, action, first, extra = plan.pop(0)
                    self.strike(now, action, first, extra)
                self.supervise(children, supplier, now, chaos=True)
                self.script.follow({s.proc.pid for s in self.slots if s.alive})
                if elapsed >= progress_at:
                    progress_at += 10.0
                    c = self.counts
                    print(
                        f"  {elapsed:5.0f}s  enqueued {self.enqueued}/{self.admitting}, unfinished "
                        f"{self.unfinished()}, kills {c.kills}, pauses {c.pauses}, restarts "
                        f"{c.restarts}",
                        flush=True,
                    )
                time.sleep(0.02)
        finally:
            self.end_chaos(stop, feeder)

    def end_chaos(self, stop: threading.Event, feeder: threading.Thread) -> None:
        """Continue every paused worker, then stop the feeder, in that order. A worker paused
        inside a write transaction holds SQLite's write lock, and the feeder's last admissions
        wait for that lock: joining the feeder first waited out its whole busy timeout, and
        the admission, and every write behind it, failed (WriteLockTimeout, seen under load)."""
        for slot in self.slots:
            if slot.paused_until is not None:
                self.resume(slot)
        stop.set()
        feeder.join(timeout=FEEDER_GRACE)
        if feeder.is_alive() and self.feeder_error is None:
            self.feeder_error = TimeoutError(
                f"the feeder was still admitting {FEEDER_GRACE:g} s after chaos ended"
            )

    def chaos_goes_on(self, elapsed: float) -> bool:
        """For the seconds asked, then until the scripted stale writes are made: a step waits
        for its event however slow the machine, up to SCRIPT_SECONDS more (then the soak fails
        naming it). The end is tied to the write, not to the clock: when the work runs out
        first (on a loaded machine every turn may finish before one takes the armed token), one
        more assignment is admitted, so a turn can still reach the boundary."""
        if elapsed < self.config.seconds:
            return True
        if not self.script.pending or elapsed >= self.config.seconds + SCRIPT_SECONDS:
            return False
        if self.enqueued < self.admitting or self.unfinished() > 0:
            return True
        if self.admitting < self.config.most_items:
            self.admitting += 1  # the feeder admits it; the invariants count it
            return True
        return False

    def drain_queue(
        self, children: SharedGroupChildren, supplier: Any, db: sqlite3.Connection
    ) -> None:
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
            except Exception as error:  # noqa: BLE001 - the implementation's: recorded, not fatal
                errors.append(f"recover_once raised {type(error).__name__}: {error}")
                if len(errors) >= 10:
                    break
                time.sleep(0.1)
                continue
            if recovery["status"] != "IDLE":
                recoveries[recovery["status"]] += 1
            elif not self.unfinished():
                recoveries["IDLE"] = 1
                break
            else:
                time.sleep(0.05)
        settled = 0
        for _ in range(3):
            try:
                rows = self.leases.reconcile(db, client)
            except Exception as error:  # noqa: BLE001
                errors.append(f"reconcile raised {type(error).__name__}: {error}")
                continue
            settled += sum(1 for row in rows if row["after"] != row["before"])
            if all(row["after"] != row["before"] for row in rows):
                break
        self.drain |= {
            "seconds": round(time.monotonic() - started, 1),
            "recover_once": dict(recoveries),
            "reconciled": settled,
            "errors": errors,
        }


def _tail(path: Path, size: int = 600) -> str:
    try:
        return path.read_bytes()[-size:].decode("utf-8", "replace").strip()
    except OSError:
        return ""
