"""The experiment's child processes: workers that hold leases over real turns, and a replacement.

    python -m lucyshop.lab.blocked lucyshop.lab.experiment.worker ROLE --dir DIR --lease SECONDS ...

``pilot``        loads the model once, then runs ``--trials`` real turns over the task kinds with
                 no lease at all, and records each in ``pilot-N.json``: the pilot's turns, timed
                 under exactly the conditions of the trials (a child process, the blocker, a
                 replacement scanning the same shop).
``holder``       loads the model once, then runs ``--trials`` trials: enqueue one item, claim it
                 with ``ttl=lease``, run one real turn, then two fenced writes, ``observe``
                 (the reply) and ``finish``; it records each trial, with every write's moment
                 and refusal, in ``trial-N.json``, and says it is done writing in
                 ``attempted-WORK.json``. ``--plan`` gives each trial its own rule and lease
                 (the rules interleaved in one process). With ``--arms`` (exercise 5) each
                 trial has an arm: ``plain``, ``renewed`` or ``bounded`` (the answers' renewer
                 runs alongside the turn, bounded by ``--bound``).
``crash``        loads the model, claims one item and runs real turns back to back until the
                 parent SIGKILLs it; each turn's start and end go to ``turns-N.jsonl`` as they
                 happen, so the parent can tell which turn the kill cut short. With
                 ``--answers`` the lease is renewed (bounded) while it runs.
``hung``         (exercise 5) claims, renews, makes ``--steps`` real steps, then hangs.
``replacement``  scans every ``--scan`` seconds with ``claim(owner=--owner, ttl=--hold-ttl)``;
                 what it takes over (an expired lease) it records in ``takeover-WORK.json`` and
                 finishes as its own. With ``--hold`` it first holds the work: it waits until
                 the old holder has tried its writes (``attempted-WORK.json``), so every stale
                 write meets generation + 1 as the current holder, then runs a real turn of its
                 own. It stops when ``stop`` appears or its parent is gone.

Every role loads the chapter functions from ``$LEASES_IMPL`` with the reference blocked (the
parent starts them through ``python_argv(..., blocked=True)``) and uses the shop file the
parent created (``--shop``, default ``DIR/shop.db``); its records, lock and stop file are in
``DIR``. With ``--sandboxed`` (the trusted side's run of exercise 5) the chapter and the answers
are called in sandboxes of the worker's own (``sandboxed.py``) instead, shown the shop's
directory alone: ``DIR`` is then out of their reach, so every record is the worker's own.
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from lucyshop.lab.experiment.renewer import Renewer, load_answers
from lucyshop.lab.experiment.sandboxed import Sandboxed
from lucyshop.lab.loader import impl_path, load_impl
from lucyshop.lab.model.backend import BACKENDS, open_model, warm_up
from lucyshop.lab.model.tasks import TASKS, kind_of, turn_messages
from lucyshop.lab.services.processes import wait_for_file, wait_until, write_ready
from lucyshop.queue import WorkQueue
from lucyshop.store import connect

SHOP = "shop.db"
LOCK = "scan.lock"
STOP = "stop"
WORKER = "worker"
REPLACEMENT = "replacement"
SETTLE_SECONDS = 300.0  # how long a refused holder waits for the replacement to finish its work
HANG_SECONDS = 600.0  # a hung worker waits this long for the parent's SIGKILL
KIND_OF_TEXT = {text: kind for kind, text in TASKS.items()}


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


def pilot(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    model = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(model)
    write_ready(
        directory / "ready-pilot.json", {"pid": os.getpid(), "model": model.name, "warm_up": warm}
    )
    for number in range(args.trials):
        kind = kind_of(number)
        started = time.time()
        reply = model.chat(turn_messages(kind), max_tokens=args.max_tokens)
        write_ready(
            directory / f"pilot-{number}.json",
            {
                "turn": number,
                "kind": kind,
                "started": started,
                "ended": time.time(),
                "seconds": reply.seconds,
                "tokens": reply.tokens,
                "text": reply.text,
            },
        )
    return 0


def attempt(write: str, call: Callable[..., None], *args: Any) -> dict[str, Any]:
    """One fenced write, ``call(*args)``: when it was made and, if the holder check refused
    it, its words."""
    at = time.time()
    try:
        call(*args)
    except PermissionError as refused:
        return {"write": write, "at": at, "accepted": False, "refusal": str(refused)}
    return {"write": write, "at": at, "accepted": True, "refusal": None}


def trial_plan(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each trial's rule, lease, task kind and arm: from ``--plan`` (a JSON list of
    ``{"rule", "lease", "kind"}``), else ``--trials`` trials under ``--lease``."""
    if args.plan:
        plan = json.loads(args.plan)
    else:
        plan = [{"rule": None, "lease": args.lease, "kind": trial} for trial in range(args.trials)]
    arms = args.arms.split(",") if args.arms else ["plain"] * len(plan)
    if len(arms) != len(plan):
        raise SystemExit(f"{len(arms)} arms for {len(plan)} trials")
    return [step | {"arm": arm} for step, arm in zip(plan, arms, strict=True)]


def start_renewer(
    args: argparse.Namespace, held: Any, directory: Path, *, bounded: bool
) -> Renewer | None:
    """With ``--answers``: the answers' renewer for ``held``, started (bounded by ``--bound``
    when ``bounded``); without, None."""
    if args.renews is None:
        return None
    renewer = Renewer(
        args.renews,
        args.shop,
        held,
        ttl=args.lease,
        interval=args.interval,
        bound=args.bound if bounded else None,
        log=directory / f"renewals-{held.work_id}.jsonl",
        connect=args.connect,
    )
    renewer.start()
    return renewer


def holder(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(args.shop)
    model = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(model)
    write_ready(
        directory / "ready-holder.json", {"pid": os.getpid(), "model": model.name, "warm_up": warm}
    )
    for trial, step in enumerate(trial_plan(args)):
        kind, lease, arm = kind_of(step["kind"]), step["lease"], step["arm"]
        held = take_new_work(leases, db, queue, directory, f"trial-{trial}", kind, lease)
        renewer = None
        if arm != "plain":
            renewer = start_renewer(args, held, directory, bounded=arm == "bounded")
        turn_started = time.time()
        reply = model.chat(turn_messages(kind), max_tokens=args.max_tokens)
        turn_ended = time.time()
        if renewer is not None:
            renewer.stop()
        message = {"role": "assistant", "content": reply.text}
        writes = [
            attempt("transcript", leases.observe, db, held, message),
            attempt("outcome", leases.finish, db, held, "DONE", WORKER),
        ]
        write_ready(directory / f"attempted-{held.work_id}.json", {"trial": trial})
        if not all(write["accepted"] for write in writes):
            wait_finished(queue, held.work_id, timeout=lease + SETTLE_SECONDS)
        write_ready(
            directory / f"trial-{trial}.json",
            {
                "trial": trial,
                "rule": step["rule"],
                "arm": arm,
                "kind": kind,
                "work_id": held.work_id,
                "generation": held.generation,
                "owner": held.owner,
                "lease": lease,
                "claimed_at": lease_start(held, lease),
                "expires": held.expires,
                "turn_started": turn_started,
                "turn_ended": turn_ended,
                "turn_seconds": reply.seconds,
                "tokens": reply.tokens,
                "text": reply.text,
                "writes": writes,
                "finish_at": writes[-1]["at"],
                "finish": "accepted" if writes[-1]["accepted"] else "refused",
                "refusal": writes[-1]["refusal"],
                "renewer_refused": None if renewer is None else renewer.refused,
            },
        )
    return 0


def crash(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(args.shop)
    model = open_model(args.backend, args.model, seed=args.seed)
    warm = warm_up(model)
    held = take_new_work(
        leases, db, queue, directory, f"detect-{args.trial}", kind_of(args.trial), args.lease
    )
    renewer = start_renewer(args, held, directory, bounded=True)
    deadline = time.time() + args.lease + SETTLE_SECONDS
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
            if renewer is not None:
                renewer.progress = number + 1
            if time.time() >= (held.expires if renewer is None else deadline):
                break
    return 1  # the parent kills this process long before its lease runs out


def hung(args: argparse.Namespace, leases: ModuleType) -> int:
    """Claim one item, renew it, make ``--steps`` real steps, then hang in a step that never
    returns (the parent kills it). ``--name bounded`` bounds the renewer by ``--bound``."""
    directory = Path(args.dir)
    db, queue = leases.open_worker_shop(args.shop)
    model = open_model(args.backend, args.model, seed=args.seed)
    warm_up(model)
    held = take_new_work(leases, db, queue, directory, f"hung-{args.name}", kind_of(0), args.lease)
    renewer = start_renewer(args, held, directory, bounded=args.name == "bounded")
    if renewer is None:
        raise SystemExit("the hung role needs --answers: it is about the answers' renewer")
    steps = []
    for step in range(args.steps):
        reply = model.chat(turn_messages(kind_of(step)), max_tokens=args.max_tokens)
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
    threading.Event().wait(HANG_SECONDS)  # the step that never returns
    return 1


def _log(log: IO[str], record: dict[str, Any]) -> None:
    """One line, handed to the kernel at once: a SIGKILL after this call cannot lose it."""
    log.write(json.dumps(record) + "\n")
    log.flush()


def hold(
    args: argparse.Namespace, model: Any, directory: Path, work_id: int, kind: str
) -> dict[str, Any]:
    """Hold a taken-over item until its old holder has tried its writes, then run a real turn:
    the stale writes arrive while this generation is the current holder."""
    seen = wait_for_file(directory / f"attempted-{work_id}.json", timeout=SETTLE_SECONDS)
    stale_seen_at = time.time()
    reply = model.chat(turn_messages(kind), max_tokens=args.max_tokens)
    return {
        "stale_trial": seen["trial"],
        "stale_seen_at": stale_seen_at,
        "turn_seconds": reply.seconds,
        "tokens": reply.tokens,
    }


def replacement(args: argparse.Namespace, leases: ModuleType) -> int:
    directory = Path(args.dir)
    db, _ = leases.open_worker_shop(args.shop)
    ttl = args.hold_ttl or args.lease
    model = None
    if args.hold:
        model = open_model(args.backend, args.model, seed=args.seed)
        warm_up(model)
    parent = os.getppid()
    write_ready(directory / "ready-replacement.json", {"pid": os.getpid(), "scan": args.scan})
    tick = time.monotonic()
    while not (directory / STOP).exists() and os.getppid() == parent:
        with scan_lock(directory):
            held = leases.claim(db, args.owner, ttl=ttl)
        if held is not None:
            # took_at is the claim's own clock, read before it waited for the write lock;
            # committed_at is after its transaction committed: only a write begun after that
            # meets generation + 1 as the current holder.
            took_at, committed_at = lease_start(held, ttl), time.time()
            held_through: dict[str, Any] = {}
            if model is not None:
                kind = KIND_OF_TEXT[held.text]  # the old holder's task, turned again
                held_through = hold(args, model, directory, held.work_id, kind)
            finished = attempt("outcome", leases.finish, db, held, "DONE", REPLACEMENT)
            write_ready(
                directory / f"takeover-{held.work_id}.json",
                {
                    "work_id": held.work_id,
                    "generation": held.generation,
                    "worker_id": held.worker_id,
                    "took_at": took_at,
                    "committed_at": committed_at,
                    "expires": held.expires,
                    "finished": finished,
                    **held_through,
                },
            )
        # A fixed cadence, not a fixed pause: the moment of expiry falls anywhere in a scan.
        tick = max(tick + args.scan, time.monotonic())
        time.sleep(max(0.0, tick - time.monotonic()))
    return 0


ROLES = {
    "pilot": pilot,
    "holder": holder,
    "crash": crash,
    "hung": hung,
    "replacement": replacement,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--dir", required=True)
    parser.add_argument("--shop", type=Path, help="the shop file (default: DIR/shop.db)")
    parser.add_argument(
        "--sandboxed",
        action="store_true",
        help="call the chapter and the answers in sandboxes of this worker's own",
    )
    parser.add_argument("--lease", type=float, required=True)
    parser.add_argument("--scan", type=float, default=0.05)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--trial", type=int, default=0)
    parser.add_argument("--backend", choices=BACKENDS, default="embedded")
    parser.add_argument("--model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--answers", help="an exercises.py whose keep_renewing renews the lease")
    parser.add_argument("--interval", type=float, help="with --answers: seconds between renewals")
    parser.add_argument("--bound", type=float, help="with --answers: the renewer's bound")
    parser.add_argument("--arms", default="", help="holder: plain|renewed|bounded per trial")
    parser.add_argument("--steps", type=int, default=1, help="hung: steps before the hang")
    parser.add_argument("--name", default="", help="hung: unbounded or bounded")
    parser.add_argument("--plan", default="", help="holder: JSON list of {rule, lease, kind}")
    parser.add_argument("--owner", default=REPLACEMENT, help="replacement: its owner label")
    parser.add_argument("--hold-ttl", type=float, help="replacement: its lease (default --lease)")
    parser.add_argument(
        "--hold", action="store_true", help="replacement: hold through the stale writes and a turn"
    )
    args = parser.parse_args(argv)
    args.shop = args.shop or Path(args.dir) / SHOP
    # The answers are loaded once, before any claim: loading them between a claim and its
    # renewer's first renewal could outlast a short lease on a starved machine.
    if not args.sandboxed:
        args.renews = load_answers(args.answers) if args.answers else None
        args.connect = connect
        return ROLES[args.role](args, load_impl())
    boxes = Path(args.dir) / f"sandbox-{args.role}-{os.getpid()}"
    with Sandboxed(impl_path(), args.shop, boxes) as pieces:
        leases = pieces.chapter()
        args.renews = pieces.answers() if args.answers else None
        args.connect = pieces.connect
        return ROLES[args.role](args, leases)


if __name__ == "__main__":
    sys.exit(main())
