"""The experiment's child processes: workers that hold leases over real turns, and a replacement.

    python -m lucyshop.lab.blocked lucyshop.lab.experiment.worker ROLE --dir DIR --lease SECONDS ...

``holder``       loads the model once, then runs ``--trials`` trials: enqueue one item, claim it
                 with ``ttl=lease``, run one real turn, ``finish``; it reports each trial,
                 including a refused finish, to ``trial-N.json``.
``crash``        loads the model, claims one item and runs real turns back to back until the
                 parent SIGKILLs it; each turn's start and end go to ``turns-N.jsonl`` as they
                 happen, so the parent can tell which turn the kill cut short.
``replacement``  scans every ``--scan`` seconds with ``claim(owner="replacement", ttl=lease)``;
                 what it takes over (an expired lease) it records in ``takeover-WORK.json`` and
                 finishes as its own. It stops when ``stop`` appears or its parent is gone.

Every role loads the chapter functions from ``$LEASES_IMPL`` with the reference blocked (the
parent starts them through ``python_argv(..., blocked=True)``) and uses the shop file the
parent created in ``DIR``.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from lucyshop.lab.experiment.backend import BACKENDS, open_model, warm_up
from lucyshop.lab.experiment.tasks import TASKS, kind_of, turn_messages
from lucyshop.lab.loader import load_impl
from lucyshop.lab.processes import wait_until, write_ready
from lucyshop.queue import WorkQueue

SHOP = "shop.db"
LOCK = "scan.lock"
STOP = "stop"
WORKER = "worker"
REPLACEMENT = "replacement"
SETTLE_SECONDS = 30.0  # how long a refused holder waits for the replacement to finish its work


@contextmanager
def scan_lock(directory: Path) -> Iterator[None]:
    """Hold the directory's lock file: a worker's enqueue-and-claim and each replacement scan.

    ``claim`` takes pending work as readily as expired work, so without this a scan could
    land between the worker's enqueue and its claim and take a fresh item that nobody had
    held. Under the lock the replacement only ever sees work a worker already holds.
    """
    with (directory / LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def take_new_work(
    leases: ModuleType,
    db: sqlite3.Connection,
    queue: WorkQueue,
    directory: Path,
    source: str,
    kind: str,
    lease: float,
) -> Any:
    """Enqueue one item and claim it under the scan lock; the claim must be that item."""
    with scan_lock(directory):
        work_id = leases.enqueue(queue, source, source, TASKS[kind])
        held = leases.claim(db, WORKER, ttl=lease)
    if held is None or held.work_id != work_id:
        raise RuntimeError(f"the worker enqueued work {work_id} but claimed {held}")
    return held


def lease_start(held: Any, lease: float) -> float:
    """The wall-clock time the claim read when it took the lease: its expiry less the lease."""
    return held.expires - lease


def wait_finished(queue: WorkQueue, work_id: int, *, timeout: float) -> None:
    """After a refused finish: wait until the replacement has taken the item over and finished
    it, so that the next claim cannot find it still running and take it instead of new work."""
    wait_until(
        lambda: queue.get(work_id)["state"] == "finished",
        timeout=timeout,
        what=f"work {work_id} to be finished by the replacement",
    )


def holder(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(directory / SHOP)
    model = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(model)
    write_ready(
        directory / "ready-holder.json", {"pid": os.getpid(), "model": model.name, "warm_up": warm}
    )
    for trial in range(args.trials):
        kind = kind_of(trial)
        held = take_new_work(leases, db, queue, directory, f"trial-{trial}", kind, args.lease)
        reply = model.chat(turn_messages(kind), max_tokens=args.max_tokens)
        finish_at = time.time()
        try:
            leases.finish(db, held, "DONE", {"by": held.worker_id, "tokens": reply.tokens})
            refusal = None
        except PermissionError as refused:
            refusal = str(refused)
            wait_finished(queue, held.work_id, timeout=args.lease + SETTLE_SECONDS)
        write_ready(
            directory / f"trial-{trial}.json",
            {
                "trial": trial,
                "kind": kind,
                "work_id": held.work_id,
                "generation": held.generation,
                "lease": args.lease,
                "claimed_at": lease_start(held, args.lease),
                "expires": held.expires,
                "turn_seconds": reply.seconds,
                "tokens": reply.tokens,
                "text": reply.text,
                "finish_at": finish_at,
                "finish": "accepted" if refusal is None else "refused",
                "refusal": refusal,
            },
        )
    return 0


def crash(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(directory / SHOP)
    model = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(model)
    held = take_new_work(
        leases, db, queue, directory, f"detect-{args.trial}", kind_of(args.trial), args.lease
    )
    with (directory / f"turns-{args.trial}.jsonl").open("a", encoding="utf-8") as log:
        for number in itertools.count():
            kind = kind_of(args.trial + number)
            _log(log, {"turn": number, "kind": kind, "started": time.time()})
            if number == 0:
                write_ready(
                    directory / f"claimed-{args.trial}.json",
                    {
                        "pid": os.getpid(),
                        "work_id": held.work_id,
                        "generation": held.generation,
                        "lease": args.lease,
                        "claimed_at": lease_start(held, args.lease),
                        "expires": held.expires,
                        "warm_up": warm,
                    },
                )
            reply = model.chat(turn_messages(kind), max_tokens=args.max_tokens)
            _log(
                log,
                {
                    "turn": number,
                    "ended": time.time(),
                    "seconds": reply.seconds,
                    "tokens": reply.tokens,
                    "text": reply.text,
                },
            )
            if time.time() >= held.expires:
                break
    return 1  # the parent kills this process long before its lease runs out


def _log(log: IO[str], record: dict[str, Any]) -> None:
    """One line, handed to the kernel at once: a SIGKILL after this call cannot lose it."""
    log.write(json.dumps(record) + "\n")
    log.flush()


def replacement(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    db, _ = leases.open_worker_shop(directory / SHOP)
    parent = os.getppid()
    write_ready(directory / "ready-replacement.json", {"pid": os.getpid(), "scan": args.scan})
    tick = time.monotonic()
    while not (directory / STOP).exists() and os.getppid() == parent:
        with scan_lock(directory):
            held = leases.claim(db, REPLACEMENT, ttl=args.lease)
        if held is not None:
            took_at = lease_start(held, args.lease)
            leases.finish(db, held, "DONE", {"by": held.worker_id})
            write_ready(
                directory / f"takeover-{held.work_id}.json",
                {
                    "work_id": held.work_id,
                    "generation": held.generation,
                    "worker_id": held.worker_id,
                    "took_at": took_at,
                },
            )
        # A fixed cadence, not a fixed pause: the moment of expiry falls anywhere in a scan.
        tick = max(tick + args.scan, time.monotonic())
        time.sleep(max(0.0, tick - time.monotonic()))
    return 0


ROLES = {"holder": holder, "crash": crash, "replacement": replacement}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--lease", type=float, required=True)
    parser.add_argument("--scan", type=float, default=0.05)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--trial", type=int, default=0)
    parser.add_argument("--backend", choices=BACKENDS, default="embedded")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    return ROLES[args.role](args, load_impl())


if __name__ == "__main__":
    sys.exit(main())
