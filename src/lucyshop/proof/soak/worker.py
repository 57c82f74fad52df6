"""A soak worker process: claim, observe, propose, approve, execute, finish, over and over.

Every fenced write and every supplier send is logged (one JSON object a line) with the
generation that attempted it, so the invariants can tell a refused stale write from an
accepted one. Once refused and superseded, a turn tries its other writes anyway, on purpose.

A scripted stale write (``--stale BOUNDARY``, ``soak.script``): the parent leaves a token in
the breaks directory; the first turn to reach that boundary takes it, says where it stopped
(``BOUNDARY.ARMING.at``) and waits, doing nothing, until the parent has seen another
generation take its work over and says go (``BOUNDARY.ARMING.go``). The write it then makes
is stale for certain.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lucyshop import approval
from lucyshop.atomic import write_ready
from lucyshop.lab.given.orders import OPERATOR
from lucyshop.lab.loader import load_impl
from lucyshop.proof.soak.shop import patient, policy_for, proposal_for
from lucyshop.supplier import SupplierClient


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
BREAK_POLL_SECONDS = 0.01


class Breaks:
    """The worker's side of the scripted stale writes (see the module's docstring)."""

    def __init__(self, directory: str | None, stop: Path, parent: int) -> None:
        self.dir = Path(directory) if directory else None
        self.stop, self.parent = stop, parent

    def stop_here(self, boundary: str, held: Any, log: Log) -> str | None:
        """If a token for ``boundary`` is left, take it and wait for the parent's go; once it
        came, the arming's number (the write that follows is stale for certain), else None."""
        if self.dir is None:
            return None
        token = self.dir / f"{boundary}.armed"
        try:
            arming = token.read_text().strip()
            token.unlink()
        except FileNotFoundError:
            return None  # none left, or another worker took it
        where = {"work_id": held.work_id, "gen": held.generation, "pid": os.getpid()}
        log.write(e="break", b=boundary, arming=arming, t=time.time(), **where)
        write_ready(self.dir / f"{boundary}.{arming}.at", where)
        go = self.dir / f"{boundary}.{arming}.go"
        while not go.exists():
            if self.stop.exists() or os.getppid() != self.parent:
                return None  # the run ends before a takeover: this write is not stale for sure
            time.sleep(BREAK_POLL_SECONDS)
        return arming

    def made(self, boundary: str, arming: str) -> None:
        """Tell the parent the scripted write is made."""
        if self.dir is not None:
            write_ready(self.dir / f"{boundary}.{arming}.done", {"pid": os.getpid()})


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
        breaks: Breaks | None = None,
    ) -> None:
        self.leases, self.db, self.client, self.log = leases, db, client, log
        self.rng, self.policy, self.held, self.lease = rng, policy, held, lease
        self.breaks = breaks
        self.order: dict[str, Any] | None = None

    def stop_at(self, boundary: str) -> str | None:
        """Stop here if the script asks for a stale write at ``boundary`` (see ``Breaks``)."""
        if self.breaks is None:
            return None
        return self.breaks.stop_here(boundary, self.held, self.log)

    def write(
        self,
        boundary: str,
        call: Callable[[], Any],
        *,
        probe: bool = False,
        scripted: str | None = None,
    ) -> Any:
        """Run one fenced write; log it accepted or refused (PermissionError);
        REFUSED if refused. A write made after a scripted stop (``scripted``: the arming) is
        logged ``scripted``, stale for certain, and the parent is told it was made."""
        extra = {"scripted": True} if scripted else {}
        try:
            return self._write(boundary, call, probe=probe, extra=extra)
        finally:
            if scripted and self.breaks is not None:
                self.breaks.made(boundary, scripted)

    def _write(
        self, boundary: str, call: Callable[[], Any], *, probe: bool, extra: dict[str, Any]
    ) -> Any:
        held, started = self.held, time.time()
        entry = {"e": "write", "b": boundary, "work_id": held.work_id, "gen": held.generation}
        entry |= {"probe": probe, "t0": started, **extra}
        try:
            result = call()
        except PermissionError as refused:
            entry |= {"ok": False, "t1": time.time(), "why": str(refused)[:300]}
            self.log.write(**entry, lease_gen=self.lease_generation())
            return REFUSED
        self.log.write(**entry, ok=True, t1=time.time())
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
        observed = self.write(
            "transcript",
            lambda: leases.observe(db, held, message),
            scripted=self.stop_at("transcript"),
        )
        if observed is REFUSED:
            return self.refused()
        order = self.write(
            "propose",
            lambda: approval.propose(
                db, held, supplier=self.client.identity, proposal=proposal_for(held.work_id)
            ),
            scripted=self.stop_at("propose"),
        )
        if order is REFUSED:
            return self.refused()
        self.order = order
        if order["status"] == "DRAFT":
            try:  # the operator's act, not the worker's: it has no holder to fence
                approval.approve(
                    db,
                    order["id"],
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
        result = f"{receipt['operation']}: {receipt['status']} (by {held.worker_id})"
        finished = self.write(
            "completion",
            lambda: leases.finish(db, held, status, result),
            scripted=self.stop_at("completion"),
        )
        if finished is REFUSED:
            return self.refused()
        return None

    def execute(self, *, probe: bool = False) -> Any:
        held, order = self.held, self.order
        scripted = None if probe else self.stop_at("supplier")  # before execute begins
        self.client.current = (held.work_id, held.generation, time.time())
        try:
            return self.write(
                "supplier",
                lambda: approval.execute(
                    self.db, held, order["id"], self.client, policy=self.policy
                ),
                probe=probe,
                scripted=scripted,
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
            lambda: leases.finish(db, held, "DONE", f"late, by {held.worker_id}"),
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
    if args.busy_timeout_ms:
        patient(db, args.busy_timeout_ms)
    policy = policy_for(args.items)
    rng = random.Random(args.worker_seed)
    stop, parent = Path(args.stop), args.parent
    breaks = Breaks(args.breaks, stop, parent)
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
            Turn(leases, db, client, log, rng, policy, held, args.lease, breaks).run()
            held = None
    except Exception as error:  # noqa: BLE001 - logged for the parent's findings, then a crash exit
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
