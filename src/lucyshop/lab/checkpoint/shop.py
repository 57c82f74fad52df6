"""A process case's world. ``Holding`` is what one stands on in either checkpoint: its supplier
process, its holder child in a sandbox like the case's own (shown the supplier through a relay),
and its events, under the case's tag. ``Shop`` adds the SQLite checkpoint's fresh shop file and
the expectations its process cases share (``postgres.PgShop``, exercise 7's schema and
expectations).

The case functions in ``checkpoints/ch13_worker_recovery.py`` drive it. Every call into the
student's code goes through the case's sandbox (``leases`` is its ``Remote``); the shop and the
supplier's ledger are read back here, by the trusted side, with plain SQL.
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import time
from abc import ABC, abstractmethod
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lucyshop import IMPL_ENV, approval, atomic
from lucyshop.lab.checkpoint.cases import CaseId
from lucyshop.lab.checkpoint.expectations import child_record, expect
from lucyshop.lab.checkpoint.judge import kept_directory, supplier_directory
from lucyshop.lab.given.orders import OWNER, POLICY
from lucyshop.lab.loader import CHAPTER
from lucyshop.lab.sandbox import Remote, Sandbox, relay, sandboxed_shop
from lucyshop.lab.sandbox.jail import inside_pids
from lucyshop.lab.services.limits import WAIT_SECONDS
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    is_stopped,
    wait_exit,
    wait_until,
    write_ready,
)
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.supplier import ledger_orders

if TYPE_CHECKING:
    from lucyshop.lab.checkpoint.runner import Run

ASSIGNMENT = "Order six tubs of vanilla for the weekend"
HOLDER = "lucyshop.lab.sandbox.inside.holder"  # the worker child, run in the case's jail


class Holding(ABC):
    """One process case's supplier, holder child and events; ``box`` is the case's sandbox,
    whose jail the holder runs in too. Each checkpoint's world says how its holder starts and
    what a rival's claim meets meanwhile."""

    def __init__(self, run: Run, box: Sandbox, directory: Path, case: CaseId) -> None:
        self.run, self.box, self.directory, self.case = run, box, directory, case
        self.relay: relay.Relay | None = None
        self.err = kept_directory(directory) / "child.err"  # out of the sandbox's reach

    def event(self, what: str, **facts: Any) -> None:
        """One event of this case in the evidence's timeline, under the case's tag."""
        self.run.event(self.case.tag, what, **facts)

    def open_supplier(self, stack: ExitStack) -> None:
        """Start the case's supplier, its ledger kept out of the sandbox's reach."""
        self.supplier = stack.enter_context(supplier_process(supplier_directory(self.directory)))
        self.client = self.supplier.client(timeout=self.run.client_timeout)

    def open_children(self, stack: ExitStack) -> None:
        """Where the holder will run: ended first on the way out, then its relay."""
        stack.callback(self._close_relay)
        self.children = stack.enter_context(SharedGroupChildren())

    def _close_relay(self) -> None:
        if self.relay is not None:
            self.relay.close()

    def spawn_holder(
        self, module: str, argv: list[str], env: dict[str, str], shown: list[tuple[Path, Path]]
    ) -> tuple[Any, dict[str, Any]]:
        """Start ``python -m module`` in the case's holder mode, in the case's jail (``shown``
        those directories too), with ``argv`` and ``env`` added; return it once its ready
        record is written."""
        jail = self.box.jail
        command = [sys.executable, "-m", module, str(self.case.holder), *argv]
        command += ["--dir", str(self.directory)]
        command += ["--endpoint", self.supplier.endpoint, "--identity", self.supplier.identity]
        command += ["--lease", str(self.run.lease), "--timeout", str(self.run.client_timeout)]
        shown = list(shown)
        if jail.mode == "bwrap":  # no network in there: the supplier through a relay
            self.relay = relay.Relay(urlsplit(self.supplier.endpoint).port)
            command += ["--relay", str(relay.INSIDE / relay.NAME)]
            shown.append((self.relay.directory, relay.INSIDE))
        with open(self.err, "w") as stderr:  # the child writes through the descriptor
            child = self.children.spawn(jail.argv(command, shown), env=jail.env(env), stderr=stderr)
        ready = child_record(child, self.directory / "ready.json", WAIT_SECONDS, self.box.shown)
        # The holder knows its pid in the sandbox's PID namespace only (often 2); the evidence
        # and `lucy status` need this machine's, or None where it cannot be told.
        ready["pid"] = host_pid(child, ready["pid"])
        return child, ready

    @abstractmethod
    def start_holder(self) -> tuple[Any, dict[str, Any]]:
        """Start the case's worker child; return it with its ready record once it holds the
        work."""

    @abstractmethod
    def competing_claim_gets_nothing(self) -> None:
        """A rival's claim while the holder's lease is alive gets nothing."""

    def kill(self, child: Any) -> int:
        """SIGKILL the holder, wait for it to exit and expect the signal as its exit status."""
        child.send_signal(signal.SIGKILL)
        status = wait_exit(child, timeout=WAIT_SECONDS)
        self.event("holder exited", status=status)
        expect("holder exit status", status, -signal.SIGKILL)
        return status

    def kill_holder(self) -> tuple[dict[str, Any], int]:
        """The killed-holder case's opening in either checkpoint: the holder starts and holds
        the work, a rival's claim gets nothing, the holder is killed. Its ready record and
        exit status."""
        child, ready = self.start_holder()
        self.competing_claim_gets_nothing()
        return ready, self.kill(child)

    def release(self, child: Any) -> dict[str, str]:
        """Let a still-living holder go on; return its record of its stale writes."""
        write_ready(self.directory / "release.json", {"released_at": time.time()})
        stale = self.directory / "stale.json"
        outcomes = child_record(child, stale, WAIT_SECONDS, self.box.shown)
        status = wait_exit(child, timeout=WAIT_SECONDS)
        self.event("stale holder wrote back", exit_status=status, **outcomes)
        return outcomes


class Shop(Holding):
    """One case's world: a fresh shop file, a supplier process, and the expectations they share."""

    def __init__(self, run: Run, leases: Any, directory: Path, case: CaseId) -> None:
        super().__init__(run, leases._sandbox, directory, case)
        self.leases = leases

    def __enter__(self) -> Shop:
        """Start the supplier, make the shop, enqueue the assignment. On the way out (or if
        this fails part way) the holder is ended first, then the relay, the shop, the supplier."""
        with ExitStack() as stack:
            self.open_supplier(stack)
            self.db, queue = sandboxed_shop(self.leases, self.directory / "shop.db")
            stack.callback(self.db.close)
            self.open_children(stack)
            self.work_id = self.leases.enqueue(queue, f"{self.case.tag}-1", "session-a", ASSIGNMENT)
            self.event("enqueued", work_id=self.work_id, supplier_pid=self.supplier.pid)
            self._open = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._open.__exit__(*exc)  # type: ignore[arg-type]

    def start_holder(self) -> tuple[Any, dict[str, Any]]:
        """Start the case's worker child; return it once its ready record says it holds
        approved work."""
        jail = self.box.jail
        argv = ["--shop", str(self.directory / "shop.db")]
        env = {IMPL_ENV: str(jail.inside(jail.staged / CHAPTER))}
        child, ready = self.spawn_holder(HOLDER, argv, env, [])
        self.event(
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
        self.event("competing claim", got=None if rival is None else rival.worker_id)
        expect("competing claim while the holder's lease is alive", rival, None)

    def wait_for_expiry(self, ready: dict[str, Any]) -> float:
        """Sleep until the holder's lease has really run out; return the seconds waited."""
        start = time.time()
        wait_until(
            lambda: time.time() > ready["expires"],
            timeout=self.run.lease + WAIT_SECONDS,
            what="the holder's lease to expire",
        )
        waited = round(time.time() - start, 3)
        self.event("lease expired", waited_seconds=waited)
        return waited

    def recover_after_expiry(self, ready: dict[str, Any]) -> tuple[dict[str, Any], float, int]:
        """Wait for the real expiry, then run the replacement with every model refused: what
        ``recover_once`` returned, the seconds waited and the model calls it made."""
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
        said = recovery if isinstance(recovery, dict) else {}  # else the expectation says what
        self.event(
            "replacement finished",
            status=said.get("status"),
            generation=said.get("generation"),
            model_calls=guard.calls,
        )
        expect(
            "recovery",
            recovery,
            {"status": "DONE", "work": self.work_id, "generation": 2},
        )
        expect("model calls during recovery", guard.calls, 0)
        return recovery, waited, guard.calls

    def settled(
        self, ready: dict[str, Any], generation: int, before: dict[str, int]
    ) -> dict[str, Any]:
        """Read both databases back: one order at the supplier, the money moved, no transcript;
        ``generation``: the replacement's."""
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
            "generations": [ready["generation"], generation],
            "work_state": work,
            "outcome": outcome["status"],
            "ledger_count": len(ledger),
            "ledger_operations": operations,
            "reserved_cents": [before["reserved_cents"], after["reserved_cents"]],
            "spent_cents": [before["spent_cents"], after["spent_cents"]],
            "transcript_rows": transcript,
        }

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


def host_pid(child: Any, inside: Any) -> int | None:
    """The host's pid of the process in ``child``'s sandbox that knows itself as pid
    ``inside``; None if none of them does."""
    for pid in sorted(inside_pids(child)):
        if namespace_pids(pid)[-1] == inside:
            return pid
    return None


def namespace_pids(pid: int) -> list[int]:
    """A process's pid in each PID namespace it is in, the host's first (``NSpid`` in
    ``/proc/PID/status``); just ``[pid]`` where the system does not say."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return [pid]
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return [int(number) for number in line.split()[1:]]
    return [pid]


def stopped(child: Any) -> bool:
    """True once every process of the holder's sandbox is stopped by a signal."""
    pids = inside_pids(child)
    return bool(pids) and all(is_stopped(pid) for pid in pids)


class refused_models:
    """Any model call during recovery is counted and refused, in the worker that recovers:
    recovery reads records, not models."""

    def __init__(self, leases: Remote) -> None:
        self.probes = leases._sandbox.kit("lucyshop.lab.sandbox.inside.shop_probes")

    def __enter__(self) -> refused_models:
        self.probes.refuse_models()
        return self

    @property
    def calls(self) -> int:
        return self.probes.model_calls()

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.probes.allow_models()
