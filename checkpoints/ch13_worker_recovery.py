"""Chapter 13 checkpoint: kill, pause and out-live real workers, and recover their work.

    python checkpoints/ch13_worker_recovery.py [--impl learner|solutions|PATH]
                                               [--evidence FILE] [--lease SECONDS] [--case N]
                                               [--keep DIR]

Read it top to bottom: each case is one function, in the order the chapter tells them.

0. arithmetic    Part A functions on small cases checked by hand.
1. fence         one process, injected time (``now=``): a reacquired lease fences the old claim.
2. killed        a worker child is SIGKILLed while it holds approved work; the replacement
                 waits for the real lease to expire and continues from the records alone.
3. live stale    the same, but the old worker is alive and tries to write afterwards.
4. paused        the old worker is SIGSTOPped past its lease and resumed after the takeover.
5. post-commit   the supplier commits the order, then the worker dies before its receipt.
6. cancel        an operator cancels work that a live worker holds, one order already at
                 the supplier (its reply lost) and one approved but unsent.

Every process here runs the implementation you chose with the reference solutions blocked,
this parent included. Each case gets its own directory, shop file and supplier process, and
every wait has a deadline. Nothing rewrites the clock or the database behind the workers'
backs: cases 2-5 wait for leases to run out in real time.

Exit status: 0 every case passed, 1 a case failed, 3 the implementation is still a stub.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from lucyshop import approval, atomic
from lucyshop.lab.checkpoint.holder import DEADLINE, OPERATOR, OWNER, POLICY, refusal
from lucyshop.lab.checkpoint.judge import kept_directory, supplier_directory
from lucyshop.lab.evidence import receipts
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ENV, ROOT, ReferenceBlocked, impl_path
from lucyshop.lab.sandbox import Remote, Sandbox, describe, sandboxed_shop
from lucyshop.lab.sandbox.jail import inside_pids, signal_inside
from lucyshop.lab.sandbox.relay import INSIDE as RELAY_INSIDE
from lucyshop.lab.sandbox.relay import NAME as RELAY_NAME
from lucyshop.lab.sandbox.relay import Relay
from lucyshop.lab.services.processes import (
    Children,
    wait_exit,
    wait_for_file,
    wait_until,
    write_ready,
)
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.supplier import ledger_orders

HERE = Path(__file__).resolve()
CASE_SECONDS = 120.0  # what one case's calls into the sandbox may take in all
ASSIGNMENT = "Order six tubs of vanilla for the weekend"


class CheckFailed(AssertionError):
    def __init__(self, check: str, expected: Any, seen: Any) -> None:
        self.check, self.expected, self.seen = check, expected, seen
        super().__init__(f"{check}: {self.difference()}")

    def difference(self) -> str:
        """What differs: for two dicts, each differing field by name (``generation expected 2,
        saw 1``), else the two values whole."""
        expected, seen = self.expected, self.seen
        if isinstance(expected, dict) and isinstance(seen, dict):
            keys = [key for key in expected if expected[key] != seen.get(key)]
            keys += [key for key in seen if key not in expected]
            return "; ".join(
                f"{key} expected {expected.get(key)!r}, saw {seen.get(key)!r}" for key in keys
            )
        return f"expected {expected!r}, saw {seen!r}"


def claimed(held: Any) -> dict[str, Any]:
    """What a claim took, by name: which work, at which generation."""
    return {"work_id": held.work_id, "generation": held.generation}


def expect(check: str, seen: Any, expected: Any) -> None:
    if seen != expected:
        raise CheckFailed(check, expected, seen)


@dataclass
class Run:
    """What this run observed: the evidence file is written from this and nothing else."""

    impl: Path
    lease: float
    client_timeout: float
    started: float = field(default_factory=time.time)
    provenance: dict[str, Any] = field(default_factory=dict)  # receipts.provenance, at the start
    timeline: list[dict[str, Any]] = field(default_factory=list)
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)

    def event(self, case: str, what: str, **facts: Any) -> None:
        self.timeline.append(
            {"t": round(time.time() - self.started, 4), "case": case, "event": what, **facts}
        )


# ------------------------------------------------------------------ case 0


def case_arithmetic(run: Run, leases: Any) -> dict[str, Any]:
    """Part A on numbers small enough to check by hand."""
    turns = [
        0.9,
        0.3,
        0.5,
        1.2,
        0.4,
        0.7,
        2.0,
        0.6,
        0.8,
        1.0,
    ]  # sorted: .3 .4 .5 .6 .7 .8 .9 1 1.2 2
    expect("percentile(turns, 50)", leases.percentile(turns, 50), 0.7)
    expect("percentile(turns, 90)", leases.percentile(turns, 90), 1.2)
    expect("percentile(turns, 100)", leases.percentile(turns, 100), 2.0)
    expect("false_expiry_share(turns, 0.8)", leases.false_expiry_share(turns, 0.8), 0.4)
    expect("false_expiry_share(turns, 2.0)", leases.false_expiry_share(turns, 2.0), 0.0)
    expect("shortest_lease(turns, 0.1)", leases.shortest_lease(turns, 0.1), 1.2)
    expect("shortest_lease(turns, 0)", leases.shortest_lease(turns, 0), 2.0)
    delay = leases.detection_delay(4.0, 1.0, 0.2)
    expect("detection_delay(4.0, 1.0, 0.2) rounded", round(delay, 9), 3.6)
    expect("fenced(1, 2)", leases.fenced(1, 2), True)
    expect("fenced(2, 2)", leases.fenced(2, 2), False)
    run.event("arithmetic", "checked", detection_delay=delay)
    return {
        "p50": leases.percentile(turns, 50),
        "p90": leases.percentile(turns, 90),
        "detection_delay": delay,
    }


# ------------------------------------------------------------------ case 1


def case_fence(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """One process, time injected with ``now=`` so the expiry is exact (and said so)."""
    db, queue = sandboxed_shop(leases, directory / "shop.db")
    first = leases.enqueue(queue, "fence-1", "session-a", "turn one")
    second = leases.enqueue(queue, "fence-2", "session-a", "turn two")
    t0, ttl = 1_000_000.0, 30.0
    old = leases.claim(db, OWNER, ttl=ttl, now=t0)
    expect("first claim", claimed(old), {"work_id": first, "generation": 1})
    expect(
        "competing claim while the lease is alive",
        leases.claim(db, "rival", ttl=ttl, now=t0 + 1),
        None,
    )
    new = leases.claim(db, OWNER, ttl=ttl, now=t0 + ttl)  # injected: the instant it expires
    expect("same owner reacquires expired work", claimed(new), {"work_id": first, "generation": 2})
    refused = {}
    for boundary, write in (
        (
            "transcript",
            lambda: leases.observe(
                db, old, {"role": "assistant", "text": "stale"}, now=t0 + ttl + 1
            ),
        ),
        ("completion", lambda: leases.finish(db, old, "DONE", {"by": "stale"}, now=t0 + ttl + 1)),
    ):
        refused[boundary] = refusal(write)
    expect_refused(refused, ("completion", "transcript"), "generation 2 took the work")
    expect(
        "second turn of the session waits",
        leases.claim(db, "rival", ttl=ttl, now=t0 + ttl + 2),
        None,
    )
    leases.observe(db, new, {"role": "assistant", "text": "current"}, now=t0 + ttl + 2)
    leases.finish(db, new, "DONE", {"by": "generation 2"}, now=t0 + ttl + 3)
    nxt = leases.claim(db, OWNER, ttl=ttl, now=t0 + ttl + 4)
    expect("next turn claimed", claimed(nxt), {"work_id": second, "generation": 1})
    generations = [
        r[0] for r in db.execute("SELECT generation FROM transcript WHERE work_id = ?", (first,))
    ]
    expect("transcript generations of the first turn", generations, [2])
    outcome = db.execute(
        "SELECT generation, status FROM outcomes WHERE work_id = ?", (first,)
    ).fetchone()
    written = None if outcome is None else {"generation": outcome[0], "status": outcome[1]}
    expect("outcome written by generation 2", written, {"generation": 2, "status": "DONE"})
    run.event("fence", "stale generation refused", **refused)
    return {
        "time": "injected with now=",
        "generations": [old.generation, new.generation],
        "next_turn_generation": nxt.generation,
        "refused": refused,
        "transcript_generations": generations,
    }


# ------------------------------------------------------------------ cases 2-5: real processes


def case_killed(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """SIGKILL the holder; the replacement waits out the real lease and recovers from records."""
    with Shop(run, leases, directory, "killed") as shop, Children() as children:
        child, ready = shop.start_holder(children, "killed")
        shop.competing_claim_gets_nothing()
        child.send_signal(signal.SIGKILL)
        status = wait_exit(child, timeout=DEADLINE)
        run.event("killed", "holder exited", status=status)
        expect("holder exit status", status, -signal.SIGKILL)
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery, before)
        again = leases.recover_once(shop.db, owner=OWNER, supplier=shop.client, policy=POLICY)
        expect("a second recovery", again.status, "IDLE")
        return facts | {
            "child_pid": ready["pid"],
            "exit_status": status,
            "waited_seconds": waited,
            "model_calls": calls,
            "second_recovery": again.status,
        }


def case_live_stale(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """The holder is alive all along: after the takeover it tries every controlled write."""
    with Shop(run, leases, directory, "live") as shop, Children() as children:
        child, ready = shop.start_holder(children, "live")
        shop.competing_claim_gets_nothing()
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery, before)
        stale = shop.release(child, ready)
        expect_refused(stale, WRITES, "the replacement took the work")
        facts |= shop.unchanged_after_stale(ready)
        return facts | {
            "child_pid": ready["pid"],
            "waited_seconds": waited,
            "model_calls": calls,
            "stale_child_reported": stale,
        }


def case_paused(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """SIGSTOP the holder just before its send, past the lease;
    SIGCONT it once a replacement holds the work.

    For a moment two live workers believe they hold the same work. Only the generation in
    ``worker_id`` tells chapter 11's unchanged check which one may send.
    """
    with Shop(run, leases, directory, "paused") as shop, Children() as children:
        child, ready = shop.start_holder(children, "paused")
        signal_inside(child, signal.SIGSTOP)
        expect(
            "holder is stopped",
            wait_until(lambda: _stopped(child), timeout=DEADLINE, what="the holder to stop"),
            True,
        )
        run.event("paused", "holder stopped", pid=child.pid)
        before = approval.account(shop.db)
        waited = shop.wait_for_expiry(ready)
        takeover = leases.claim(shop.db, OWNER, ttl=30)
        expect(
            "replacement takes over", claimed(takeover), {"work_id": shop.work_id, "generation": 2}
        )
        run.event("paused", "replacement holds the work", generation=takeover.generation)
        signal_inside(child, signal.SIGCONT)
        run.event("paused", "holder continued", pid=child.pid)
        stale = shop.release(child, ready)
        expect_refused(stale, WRITES, "the replacement took the work")
        expect(
            "supplier ledger after the stale send", len(ledger_orders(shop.supplier.database)), 0
        )
        receipt = approval.execute(shop.db, takeover, ready["order_id"], shop.client, policy=POLICY)
        leases.finish(shop.db, takeover, "DONE", {"receipt": receipt["status"]})
        run.event(
            "paused",
            "replacement finished",
            status=receipt["status"],
            generation=takeover.generation,
        )
        recovery = leases.Recovery("DONE", takeover.work_id, takeover.generation)
        facts = shop.settled(ready, recovery, before)
        return facts | {
            "child_pid": ready["pid"],
            "waited_seconds": waited,
            "stale_child_reported": stale,
        }


def case_post_commit(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """The supplier commits and holds its reply; the holder dies before recording the receipt."""
    with Shop(run, leases, directory, "post-commit") as shop, Children() as children:
        shop.supplier.set_faults(delay_next=1, delay_seconds=DEADLINE)
        child, ready = shop.start_holder(children, "sending")
        wait_until(
            lambda: ledger_orders(shop.supplier.database),
            timeout=DEADLINE,
            what="the supplier to commit the order",
        )
        run.event("post-commit", "supplier committed; reply held back")
        child.send_signal(signal.SIGKILL)
        status = wait_exit(child, timeout=DEADLINE)
        run.event("post-commit", "holder exited", status=status)
        expect("holder exit status", status, -signal.SIGKILL)
        order = approval.get_order(shop.db, ready["order_id"])["status"]
        expect("order left uncertain by the crash", order, "SENDING")
        before = approval.account(shop.db)
        recovery, waited, calls = shop.recover_after_expiry(ready)
        facts = shop.settled(ready, recovery, before)
        return facts | {
            "child_pid": ready["pid"],
            "exit_status": status,
            "order_after_crash": order,
            "waited_seconds": waited,
            "model_calls": calls,
        }


def case_cancel(run: Run, leases: Any, directory: Path) -> dict[str, Any]:
    """The operator cancels while a live worker holds the turn;
    an order already sent is reconciled."""
    with Shop(run, leases, directory, "cancel") as shop, Children() as children:
        shop.supplier.set_faults(drop_next=1)  # the first order is committed, its reply lost
        child, ready = shop.start_holder(children, "cancel")
        sent, unsent = (
            approval.get_order(shop.db, ready[k]) for k in ("order_id", "second_order_id")
        )
        expect(
            "orders before the cancel",
            {"sent": sent["status"], "unsent": unsent["status"]},
            {"sent": "UNKNOWN", "unsent": "APPROVED"},
        )
        cancelled = leases.cancel(
            shop.db,
            shop.work_id,
            actor=OPERATOR,
            policy=POLICY,
            reason="the customer called to cancel",
        )
        run.event("cancel", "operator cancelled", generation=cancelled["generation"])
        lease = shop.db.execute(
            "SELECT generation FROM assignment_leases WHERE work_id = ?", (shop.work_id,)
        ).fetchone()[0]
        expect("lease generation advanced by the cancel", lease, ready["generation"] + 1)
        outcome = shop.db.execute(
            "SELECT status FROM outcomes WHERE work_id = ?", (shop.work_id,)
        ).fetchone()[0]
        expect("outcome", outcome, "CANCELED")
        after = [approval.get_order(shop.db, o["order_id"])["status"] for o in (sent, unsent)]
        expect("sent order left for reconcile, unsent one revoked", after, ["UNKNOWN", "REVOKED"])
        expect(
            "reservation kept for the uncertain order",
            approval.account(shop.db)["reserved_cents"],
            sent["amount_cents"],
        )
        stale = shop.release(child, ready)
        expect_refused(stale, WRITES, "the operator cancelled the work")
        settled = leases.reconcile(shop.db, shop.client)
        run.event("cancel", "reconciled", orders=[(r["operation"], r["after"]) for r in settled])
        expect(
            "reconcile settles the sent order",
            [(r["operation"], r["after"]) for r in settled],
            [(sent["operation"], "ACCEPTED")],
        )
        ledger = [row["operation"] for row in ledger_orders(shop.supplier.database)]
        expect("supplier ledger", ledger, [sent["operation"]])
        money = approval.account(shop.db)
        expect(
            "money after reconcile",
            {"reserved_cents": money["reserved_cents"], "spent_cents": money["spent_cents"]},
            {"reserved_cents": 0, "spent_cents": sent["amount_cents"]},
        )
        return {
            "child_pid": ready["pid"],
            "generations": [ready["generation"], lease],
            "outcome": outcome,
            "orders_after_cancel": after,
            "reconciled": settled,
            "ledger_count": len(ledger),
            "ledger_operations": ledger,
            "stale_child_reported": stale,
            "reserved_cents": money["reserved_cents"],
            "spent_cents": money["spent_cents"],
        }


class Shop:
    """One case's world: a fresh shop file, a supplier process, and the checks they share."""

    def __init__(self, run: Run, leases: Any, directory: Path, case: str) -> None:
        self.run, self.leases, self.directory, self.case = run, leases, directory, case
        self.relay: Relay | None = None
        self.err = kept_directory(directory) / "child.err"  # out of the sandbox's reach

    def __enter__(self) -> Shop:
        self._supplier = supplier_process(supplier_directory(self.directory))
        self.supplier = self._supplier.__enter__()
        self.client = self.supplier.client(timeout=self.run.client_timeout)
        self.db, queue = sandboxed_shop(self.leases, self.directory / "shop.db")
        self.work_id = self.leases.enqueue(queue, f"{self.case}-1", "session-a", ASSIGNMENT)
        self.run.event(self.case, "enqueued", work_id=self.work_id, supplier_pid=self.supplier.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()
        if self.relay is not None:
            self.relay.close()
        self._supplier.__exit__(*exc)

    def start_holder(self, children: Children, mode: str) -> tuple[Any, dict[str, Any]]:
        """Start a worker child; return it once its ready record says it holds approved work."""
        ready_file = self.directory / "ready.json"
        box = self.leases._sandbox
        argv = [sys.executable, "-m", "lucyshop.lab.checkpoint.holder", mode]
        argv += ["--shop", str(self.directory / "shop.db"), "--dir", str(self.directory)]
        argv += ["--endpoint", self.supplier.endpoint, "--identity", self.supplier.identity]
        argv += ["--lease", str(self.run.lease), "--timeout", str(self.run.client_timeout)]
        shown = []
        if box.jail.mode == "bwrap":  # no network in there: the supplier through a relay
            self.relay = Relay(urlsplit(self.supplier.endpoint).port)
            argv += ["--relay", str(RELAY_INSIDE / RELAY_NAME)]
            shown = [(self.relay.directory, RELAY_INSIDE)]
        inside = box.jail.inside(box.jail.staged / "ch13_leases.py")
        env = box.jail.env({ENV: str(inside)})
        with open(self.err, "w") as stderr:  # the child writes through the descriptor
            child = children.spawn(box.jail.argv(argv, shown), env=env, stderr=stderr)
        ready = _child_record(child, ready_file, self.err)
        self.run.event(
            self.case,
            "holder ready",
            pid=ready["pid"],
            generation=ready["generation"],
            operation=ready["operation"],
            lease_expires=ready["expires"],
        )
        expect("holder's generation", ready["generation"], 1)
        return child, ready

    def competing_claim_gets_nothing(self) -> None:
        rival = self.leases.claim(self.db, "rival", ttl=self.run.lease)
        self.run.event(self.case, "competing claim", got=None if rival is None else rival.worker_id)
        expect("competing claim while the holder's lease is alive", rival, None)

    def wait_for_expiry(self, ready: dict[str, Any]) -> float:
        """Sleep until the holder's lease has really run out; return the seconds waited."""
        start = time.time()
        wait_until(
            lambda: time.time() > ready["expires"],
            timeout=self.run.lease + DEADLINE,
            what="the holder's lease to expire",
        )
        waited = round(time.time() - start, 3)
        self.run.event(self.case, "lease expired", waited_seconds=waited)
        return waited

    def recover_after_expiry(self, ready: dict[str, Any]) -> tuple[Any, float, int]:
        """Wait for the real expiry, then run the replacement with every model refused."""
        waited = self.wait_for_expiry(ready)
        before = kept_directory(self.directory) / "shop-before-recovery.db"
        with sqlite3.connect(before) as copy:
            self.db.backup(copy)  # the records as the replacement found them, for the status report
        copy.close()
        # Shown beside the shop; a rename replaces whatever name the sandbox left there, never
        # following it (the two directories are siblings, on one file system).
        atomic.place(before, self.directory / "shop-before-recovery.db")
        with refused_models(self.leases) as guard:
            recovery = self.leases.recover_once(
                self.db, owner=OWNER, supplier=self.client, policy=POLICY
            )
        self.run.event(
            self.case,
            "replacement finished",
            status=recovery.status,
            generation=recovery.generation,
            model_calls=guard.calls,
        )
        expect(
            "recovery",
            {"status": recovery.status, "generation": recovery.generation},
            {"status": "DONE", "generation": 2},
        )
        expect("model calls during recovery", guard.calls, 0)
        return recovery, waited, guard.calls

    def settled(
        self, ready: dict[str, Any], recovery: Any, before: dict[str, int]
    ) -> dict[str, Any]:
        """Read both databases back: one order at the supplier, the money moved, no transcript."""
        ledger = ledger_orders(self.supplier.database)  # the supplier's own file, not our records
        operations = [row["operation"] for row in ledger]
        expect("supplier ledger operations", operations, [ready["operation"]])
        after = approval.account(self.db)
        amount = approval.get_order(self.db, ready["order_id"])["amount_cents"]
        expect(
            "reserved cents",
            {"before": before["reserved_cents"], "after": after["reserved_cents"]},
            {"before": amount, "after": 0},
        )
        expect("spent after", after["spent_cents"] - before["spent_cents"], amount)
        work = self.db.execute(
            "SELECT state FROM work WHERE work_id = ?", (self.work_id,)
        ).fetchone()[0]
        outcome = self.db.execute(
            "SELECT generation, status FROM outcomes WHERE work_id = ?", (self.work_id,)
        ).fetchone()
        transcript = self.db.execute("SELECT count(*) FROM transcript").fetchone()[0]
        expect("work state", work, "finished")
        expect("outcome", tuple(outcome), (2, "DONE"))
        expect("transcript rows", transcript, 0)
        return {
            "generations": [ready["generation"], recovery.generation],
            "work_state": work,
            "outcome": outcome["status"],
            "ledger_count": len(ledger),
            "ledger_operations": operations,
            "reserved_cents": [before["reserved_cents"], after["reserved_cents"]],
            "spent_cents": [before["spent_cents"], after["spent_cents"]],
            "transcript_rows": transcript,
        }

    def release(self, child: Any, ready: dict[str, Any]) -> dict[str, str]:
        """Let a still-living holder go on; return what it reports of its three writes."""
        write_ready(self.directory / "release.json", {"released_at": time.time()})
        report = _child_record(child, self.directory / "stale.json", self.err)
        status = wait_exit(child, timeout=DEADLINE)
        self.run.event(self.case, "stale holder reported", exit_status=status, **report)
        return report

    def unchanged_after_stale(self, ready: dict[str, Any]) -> dict[str, Any]:
        ledger = ledger_orders(self.supplier.database)
        expect("supplier ledger after the stale writes", len(ledger), 1)
        outcome = self.db.execute(
            "SELECT generation, status FROM outcomes WHERE work_id = ?", (self.work_id,)
        ).fetchone()
        expect("outcome after the stale writes", tuple(outcome), (2, "DONE"))
        expect(
            "transcript rows after the stale writes",
            self.db.execute("SELECT count(*) FROM transcript").fetchone()[0],
            0,
        )
        return {"ledger_count_after_stale": len(ledger)}


# ------------------------------------------------------------------ the worker child


# Which chapter function fences each write a stale holder tries, and what that write is.
WRITES = ("completion", "supplier", "transcript")
FENCED_BY = {
    "completion": ("finish()", "completion"),
    "transcript": ("observe()", "transcript row"),
    "supplier": ("Claim.worker_id (the supplier send's holder check)", "supplier send"),
}


def expect_refused(report: dict[str, str], writes: tuple[str, ...], after: str) -> None:
    """Every stale write in ``writes`` was refused; else name the function that let one in,
    and the rule it broke (what the function tests may have missed)."""
    accepted = [w for w in writes if w not in refused_at(report)]
    if accepted:
        function, what = FENCED_BY[accepted[0]]
        raise CheckFailed(
            f"{function} accepted generation 1's {what} after {after}",
            "PermissionError",
            report[accepted[0]],
        )


def refused_at(report: dict[str, str]) -> list[str]:
    """The boundaries at which a write was refused with PermissionError, sorted."""
    return sorted(k for k, v in report.items() if v.startswith("PermissionError"))


def _child_record(child: Any, path: Path, stderr: Path) -> dict[str, Any]:
    record = wait_for_file(path, timeout=DEADLINE, proc=child)
    path.unlink()
    if "not_started" in record:
        raise NotStarted(record["not_started"], record["section"], record["where"])
    if "reference_blocked" in record:
        raise ReferenceBlocked(record["reference_blocked"])
    return record


def _stopped(child: Any) -> bool:
    """True once every process of the holder's sandbox is stopped by a signal."""
    pids = inside_pids(child)
    try:
        return bool(pids) and all(
            psutil.Process(pid).status() == psutil.STATUS_STOPPED for pid in pids
        )
    except psutil.NoSuchProcess:
        return False


class refused_models:
    """Any model call during recovery is counted and refused, in the worker that recovers:
    recovery reads records, not models."""

    def __init__(self, leases: Remote) -> None:
        self.probes = leases._sandbox.kit("lucyshop.lab.sandbox.probes")

    def __enter__(self) -> refused_models:
        self.probes.refuse_models()
        return self

    @property
    def calls(self) -> int:
        return self.probes.model_calls()

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.probes.allow_models()


# ------------------------------------------------------------------ the parent


CASES = {
    0: ("arithmetic", lambda run, leases, _dir: case_arithmetic(run, leases)),
    1: ("fence", case_fence),
    2: ("killed holder", case_killed),
    3: ("live stale holder", case_live_stale),
    4: ("paused holder", case_paused),
    5: ("crash after remote acceptance", case_post_commit),
    6: ("cancel", case_cancel),
}


def summary(name: str, facts: dict[str, Any]) -> str:
    """One line of what a case observed (never a constant)."""
    parts = []
    if "exit_status" in facts:
        parts.append(f"exit {facts['exit_status']}")
    if "generations" in facts:
        parts.append("generation " + "->".join(map(str, facts["generations"])))
    if "outcome" in facts:
        parts.append(facts["outcome"])
    if "ledger_count" in facts:
        parts.append(f"ledger {facts['ledger_count']} order")
    if "stale_child_reported" in facts:
        parts.append("stale " + "/".join(refused_at(facts["stale_child_reported"])) + " refused")
    if "refused" in facts:
        parts.append("stale " + "/".join(refused_at(facts["refused"])) + " refused")
    if "model_calls" in facts:
        parts.append(f"model calls {facts['model_calls']}")
    if "waited_seconds" in facts:
        parts.append(f"waited {facts['waited_seconds']:.2f}s")
    if "orders_after_cancel" in facts:
        parts.append(
            "orders "
            + "/".join(facts["orders_after_cancel"])
            + " after cancel, reconciled "
            + "/".join(r["after"] for r in facts["reconciled"])
        )
    if "p50" in facts:
        parts.append(f"p50 {facts['p50']} p90 {facts['p90']} delay {facts['detection_delay']:.3f}")
    return ", ".join(parts)


INTERRUPTED: list[int] = []  # SIGINT received: a KeyboardInterrupt that is the user's


def _interrupted(signum: int, _frame: Any) -> None:
    INTERRUPTED.append(signum)
    raise KeyboardInterrupt


def run_case(
    run: Run, leases: Any, number: int, directory: Path, rerun: str
) -> tuple[dict[str, Any], str]:
    """Run one case: (its evidence record, the line to print). Whatever the student's code
    raises, ``SystemExit`` and ``KeyboardInterrupt`` included, fails this case by name."""
    name, case = CASES[number]
    again = f"      rerun: {rerun} --case {number}"
    try:
        facts = case(run, leases, directory)
    except NotStarted as stub:
        record = {"result": "not started", "function": stub.function, "message": str(stub)}
        return record, f"NOT STARTED  {number} {name}: {stub}"
    except ReferenceBlocked as blocked:
        record = {"result": "fail", "message": str(blocked)}
        return record, f"FAIL  {number} {name}: {blocked}"
    except CheckFailed as failed:
        record = {
            "result": "fail",
            "check": failed.check,
            "expected": repr(failed.expected),
            "seen": repr(failed.seen),
            "message": str(failed),
        }
        return record, f"FAIL  {number} {name}: {failed}\n{again}"
    # A student's code may raise anything, SystemExit included: fail this case and say where.
    except BaseException as error:
        if INTERRUPTED:
            raise  # a real Ctrl-C stops the checkpoint; a KeyboardInterrupt raised by code fails
        kind = type(error).__name__
        where = traceback.extract_tb(error.__traceback__)[-1]
        stopped = " (it tried to stop the checkpoint)" if not isinstance(error, Exception) else ""
        message = f"{kind}{stopped}: {error}"
        record = {"result": "fail", "error": message, "message": message}
        return (
            record,
            f"FAIL  {number} {name}: {message}\n      at {where.filename}:{where.lineno}\n{again}",
        )
    return {"result": "pass"} | facts, f"PASS  {number} {name}: {summary(name, facts)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--impl", default=os.environ.get(ENV, "learner"))
    parser.add_argument("--evidence", type=Path)
    parser.add_argument(
        "--lease", type=float, default=2.0, help="real lease in seconds (default 2)"
    )
    parser.add_argument("--case", type=int, action="append", choices=sorted(CASES))
    parser.add_argument(
        "--keep", type=Path, help="keep each case's shop and ledger under this directory"
    )
    args = parser.parse_args(argv)
    if not math.isfinite(args.lease) or not 0.5 <= args.lease <= 60:
        parser.error("--lease must be between 0.5 and 60 seconds")
    impl = impl_path(args.impl)
    signal.signal(signal.SIGINT, _interrupted)
    run = Run(impl=impl, lease=args.lease, client_timeout=round(args.lease * 0.4, 3))
    command = sys.argv if argv is None else [str(HERE), *argv]
    run.provenance = receipts.provenance(command=command, code=[impl])
    root = args.keep or Path(tempfile.mkdtemp(prefix="ch13-checkpoint-"))
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="ch13-checkpoint-sandbox-"))
    try:
        return run_cases(run, args, root, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def run_cases(run: Run, args: argparse.Namespace, root: Path, workdir: Path) -> int:
    """Every case chosen, each with a sandbox of its own whose only writable place is the
    case's directory; the exit status."""
    print(
        f"checkpoint 13 on {run.impl} (lease {run.lease:g}s,"
        f" supplier timeout {run.client_timeout:g}s; {describe()})"
    )
    python = os.path.relpath(sys.executable) if sys.prefix != sys.base_prefix else "python"
    rerun = f"{python} {HERE.relative_to(ROOT)} --impl {shlex.quote(str(args.impl))}"
    results: dict[str, str] = {}
    for number in sorted(set(args.case or CASES)):
        name, _case = CASES[number]
        run.cases[name] = {"case": number, "result": "started"}
        if args.evidence:  # a case that ends the process is named by this record
            write_evidence(args.evidence, run, None)
        directory = root / f"case{number}"
        for fresh in (directory, kept_directory(directory)):
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir(parents=True)
        box = Sandbox(
            run.impl,
            scratch=[directory],
            workdir=workdir / f"case{number}",
            shown=receipts.shown(run.impl),
        )
        with box:
            box.share(directory)
            try:
                leases = box.load(seconds=CASE_SECONDS)
            except ReferenceBlocked as blocked:
                print(f"FAIL  reference blocked: {blocked}")
                return 1
            record, line = run_case(run, leases, number, directory, rerun)
        results[name] = record["result"]
        run.cases[name] = {"case": number} | record
        print(line)
        if args.evidence:
            write_evidence(args.evidence, run, None)
    outcome = 1 if "fail" in results.values() else 3 if "not started" in results.values() else 0
    print(
        {0: "checkpoint passed", 1: "checkpoint FAILED", 3: "checkpoint NOT STARTED"}[outcome]
        + f" ({sum(v == 'pass' for v in results.values())}/{len(results)} cases, "
        f"{time.time() - run.started:.1f}s)"
    )
    if args.evidence:
        write_evidence(args.evidence, run, outcome)
        print(f"evidence: {args.evidence}")
    return outcome


def write_evidence(path: Path, run: Run, outcome: int | None) -> None:
    """The evidence so far, replaced whole (``outcome`` None while cases are still running)."""
    evidence = {
        "schema": 2,
        "provenance": receipts.finish(run.provenance),  # with the sha256 of the checked file
        "impl": str(run.impl),
        "lease_seconds": run.lease,
        "supplier_timeout_seconds": run.client_timeout,
        "exit_status": outcome,
        "seconds": round(time.time() - run.started, 3),
        "cases": run.cases,
        "timeline": run.timeline,
    }
    receipts.write_receipt(path, json.loads(json.dumps(evidence, default=str)))


if __name__ == "__main__":
    sys.exit(main())
