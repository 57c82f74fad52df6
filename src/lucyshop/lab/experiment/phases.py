"""The parent's side of the four phases, each returning its raw observations and nothing derived.

The pilot, false expiry and detection run in worker processes (``worker.py``), all under the
same blocker, model settings and scanning replacement, so that the pilot's turn times describe
the trials' turns. This side creates each shop file, starts the workers and the replacement,
kills a worker for detection, waits for what they record (every wait with a deadline) and reads
the shop back. The recovery samples are model turns in this process.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tqdm import tqdm

from lucyshop import IMPL_ENV
from lucyshop.lab.experiment.worker import SHOP, STOP
from lucyshop.lab.model.backend import describe, model_argv, open_model
from lucyshop.lab.model.tasks import (
    OPERATION,
    RECOVERY_TOOLS,
    crashed_transcript,
)
from lucyshop.lab.sandbox.remote import confined_file
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    python_argv,
    wait_exit,
    wait_for_file,
)
from lucyshop.store import connect

LOAD_SECONDS = 300.0  # starting a child and loading its model, on a busy machine
TURN_SECONDS = 300.0  # one real turn at the token cap, on a busy machine
EXIT_SECONDS = 30.0


@dataclass
class Lab:
    """What the process phases share: the implementation, the model, the work directory,
    the children."""

    leases: ModuleType
    impl: Path
    backend: str
    model: str | None
    max_tokens: int
    scan: float
    workdir: Path
    children: SharedGroupChildren
    spawned: int = 0
    # Exercise 5's hooks: a migration for every shop (its renewals table), and the arguments
    # that give each worker a renewer (``--answers PATH --interval S --bound S``).
    prepare: Callable[[sqlite3.Connection], None] | None = None
    worker_args: tuple[str, ...] = ()
    # The trusted side's run of exercise 5: ``leases`` is the chapter in a sandbox, each phase's
    # shop file lies in ``shops`` (shared with the sandboxes), opened with ``open_shop`` (the
    # shop paired with a connection of ours), and each worker calls the chapter and the
    # answers in sandboxes of its own (``--sandboxed``). ``workdir`` keeps every record.
    shops: Path | None = None
    open_shop: Callable[[Path], tuple[sqlite3.Connection, Any]] | None = None

    def shop(self, name: str) -> tuple[Path, sqlite3.Connection]:
        """A fresh directory and shop file, migrated here so that no two children race to do it."""
        directory = self.workdir / name
        directory.mkdir()
        path = self.shop_file(name)
        path.parent.mkdir(exist_ok=True)
        db, _ = (self.open_shop or self.leases.open_worker_shop)(path)
        if self.prepare is not None:
            self.prepare(db)
        return directory, db

    def shop_file(self, name: str) -> Path:
        """Where the shop of the phase ``name`` lies: beside its records, or in ``shops``."""
        return (self.workdir if self.shops is None else self.shops) / name / SHOP

    def read(self, name: str) -> sqlite3.Connection:
        """Our own connection to the shop of the phase ``name``; a shared one must still be a
        regular file of ``shops`` (a sandbox could have put a link or a FIFO in its place)."""
        path = self.shop_file(name)
        return connect(path if self.shops is None else confined_file(path, [self.shops.resolve()]))

    def spawn(self, role: str, directory: Path, lease: float, *extra: str) -> subprocess.Popen[Any]:
        """Start one ``worker.py`` role with the reference blocked; its stderr goes to a file."""
        self.spawned += 1
        argv = python_argv(
            "lucyshop.lab.experiment.worker",
            role,
            "--dir",
            str(directory),
            "--lease",
            repr(lease),
            "--shop",
            str(self.shop_file(directory.name)),
            *(["--sandboxed"] if self.shops is not None else []),
            "--scan",
            repr(self.scan),
            "--max-tokens",
            str(self.max_tokens),
            *extra,
            *(self.worker_args if role != "replacement" else ()),
            blocked=self.shops is None,  # a sandboxed worker imports no student code
        )
        with (directory / f"{role}-{self.spawned}.err").open("w") as stderr:
            return self.children.spawn(
                argv,
                env=os.environ | {IMPL_ENV: str(self.impl)},
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )

    def start_replacement(
        self, directory: Path, lease: float, *extra: str
    ) -> subprocess.Popen[Any]:
        proc = self.spawn("replacement", directory, lease, *extra)
        wait_for_file(directory / "ready-replacement.json", timeout=LOAD_SECONDS, proc=proc)
        return proc

    def stop_replacement(self, proc: subprocess.Popen[Any], directory: Path) -> dict[int, dict]:
        """Stop the scanner and return its takeovers by work id; it must have exited cleanly."""
        (directory / STOP).touch()
        expect_exit(proc, 0, "the replacement")
        takeovers = [json.loads(path.read_text()) for path in directory.glob("takeover-*.json")]
        return {record["work_id"]: record for record in takeovers}


def expect_exit(proc: subprocess.Popen[Any], status: int, who: str) -> None:
    got = wait_exit(proc, timeout=EXIT_SECONDS)
    if got != status:
        log = getattr(proc, "stderr_log", None)
        tail = Path(log).read_text(errors="replace")[-2000:] if log else ""
        raise RuntimeError(
            f"{who} (pid {proc.pid}) exited with status {got}, not {status}:\n{tail}"
        )


# ------------------------------------------------------------------ 1. pilot


def pilot(lab: Lab, turns: int, seed: int, bar: tqdm, name: str = "pilot") -> dict[str, Any]:
    """``turns`` real turns over the eight task kinds, timed in a worker process.

    The conditions are the trials': a child started with the reference blocked, the same
    model settings, and a replacement scanning the pilot's shop every ``lab.scan`` seconds
    (it finds nothing to take: the pilot holds no lease). Rows: start, end, seconds, tokens
    and text. ``name``: the phase's directory (a pilot repeated after the trials has its own).
    """
    directory, db = lab.shop(name)
    db.close()
    scanner = lab.start_replacement(directory, lease=3600.0)
    worker = lab.spawn(
        "pilot",
        directory,
        3600.0,
        "--trials",
        str(turns),
        *model_argv(lab.backend, lab.model, seed),
    )
    ready = wait_for_file(directory / "ready-pilot.json", timeout=LOAD_SECONDS, proc=worker)
    rows = []
    for number in range(turns):
        rows.append(
            wait_for_file(directory / f"pilot-{number}.json", timeout=TURN_SECONDS, proc=worker)
        )
        bar.update()
    expect_exit(worker, 0, "the pilot worker")
    lab.stop_replacement(scanner, directory)
    return {"seed": seed, "worker_warm_up": ready["warm_up"], "turns": rows}


# ------------------------------------------------------------------ 2. false expiry


def false_expiry(
    lab: Lab,
    rule: str,
    lease: float,
    trials: int,
    seed: int,
    bar: tqdm,
    *,
    arms: Sequence[str] = (),
) -> dict[str, Any]:
    """One worker process runs ``trials`` trials under ``lease`` while a replacement scans.

    Each row is the worker's own record (its claim, its turn, whether its writes were
    accepted), the replacement's takeover of that item if there was one, and the outcome row
    read back from the shop file. ``arms`` (exercise 5) names each trial's renewal arm.
    """
    holder = ["--trials", str(trials), *(["--arms", ",".join(arms)] if arms else [])]
    return holding(lab, f"expiry-{rule}", lease, trials, seed, bar, holder, [])


def interleaved(
    lab: Lab,
    name: str,
    plan: Sequence[Mapping[str, Any]],
    seed: int,
    bar: tqdm,
    *,
    owner: str,
    hold_ttl: float,
) -> dict[str, Any]:
    """Part A's trials: one worker runs ``plan`` (each trial's rule, lease and task kind, the
    rules interleaved) while a replacement with the same owner label ``owner`` scans. The
    replacement claims for ``hold_ttl`` and holds what it takes over through the old holder's
    writes and a real turn of its own, so that only the generation tells the two apart."""
    holder = ["--plan", json.dumps(list(plan))]
    scanner = [
        "--owner",
        owner,
        "--hold-ttl",
        repr(hold_ttl),
        "--hold",
        *model_argv(lab.backend, lab.model, seed + 1),
    ]
    longest = max(step["lease"] for step in plan)
    return holding(lab, name, longest, len(plan), seed, bar, holder, scanner)


def holding(
    lab: Lab,
    name: str,
    lease: float,
    trials: int,
    seed: int,
    bar: tqdm,
    holder: Sequence[str],
    scanner: Sequence[str],
) -> dict[str, Any]:
    """A holder worker (``holder``: its arguments) runs ``trials`` trials of at most ``lease``
    while a replacement (``scanner``: its arguments) scans the shop of phase ``name``."""
    directory, db = lab.shop(name)
    scan = lab.start_replacement(directory, lease, *scanner)
    worker = lab.spawn(
        "holder", directory, lease, *holder, *model_argv(lab.backend, lab.model, seed)
    )
    ready = wait_for_file(directory / "ready-holder.json", timeout=LOAD_SECONDS, proc=worker)
    rows = []
    for trial in range(trials):
        rows.append(
            wait_for_file(
                directory / f"trial-{trial}.json",
                timeout=lease + 2 * TURN_SECONDS,
                proc=worker,
            )
        )
        bar.update()
    expect_exit(worker, 0, "the worker")
    takeovers = lab.stop_replacement(scan, directory)
    for row in rows:
        row["takeover"] = takeovers.pop(row["work_id"], None)
        row["outcome"] = outcome(db, row["work_id"])
        row["transcript_generations"] = transcript(db, row["work_id"])
    if takeovers:
        raise RuntimeError(
            f"the replacement took over work that no trial enqueued: {sorted(takeovers)}"
        )
    return {
        "directory": directory.name,
        "lease": lease,
        "seed": seed,
        "worker_warm_up": ready["warm_up"],
        "trials": rows,
    }


def outcome(db: sqlite3.Connection, work_id: int) -> dict[str, Any] | None:
    """The outcome row of one item, read from the shop file: at which generation, with which
    status and result (the role that wrote it)."""
    row = db.execute(
        "SELECT generation, status, result FROM outcomes WHERE work_id = ?", (work_id,)
    ).fetchone()
    if row is None:
        return None
    return {"generation": row["generation"], "status": row["status"], "by": row["result"]}


def transcript(db: sqlite3.Connection, work_id: int) -> list[int]:
    """The generations that wrote an item's transcript rows, oldest first."""
    return [
        row["generation"]
        for row in db.execute(
            "SELECT generation FROM transcript WHERE work_id = ? ORDER BY seq", (work_id,)
        )
    ]


# ------------------------------------------------------------------ 3. detection


def kill_offsets(typical: float, trials: int, seed: int) -> list[float]:
    """When each worker dies, in seconds after its lease began: uniform within a typical turn."""
    rng = random.Random(seed)
    return [rng.uniform(0, typical) for _ in range(trials)]


def detection(
    lab: Lab,
    lease: float,
    offsets: Sequence[float],
    seeds: Sequence[int],
    bar: tqdm,
    *,
    name: str = "detection",
    owner: str | None = None,
) -> dict[str, Any]:
    """Per trial: a fresh worker claims one item and runs turns; it is SIGKILLed ``offset``
    seconds after its lease began, and the replacement's takeover time is recorded.
    ``owner``: the replacement's owner label (default its own)."""
    directory, _ = lab.shop(name)
    scanner = lab.start_replacement(directory, lease, *(["--owner", owner] if owner else []))
    rows = []
    for trial, (offset, seed) in enumerate(zip(offsets, seeds, strict=True)):
        worker = lab.spawn(
            "crash",
            directory,
            lease,
            "--trial",
            str(trial),
            *model_argv(lab.backend, lab.model, seed),
        )
        claimed = wait_for_file(
            directory / f"claimed-{trial}.json", timeout=LOAD_SECONDS, proc=worker
        )
        time.sleep(max(0.0, claimed["claimed_at"] + offset - time.time()))
        if worker.poll() is not None:
            raise RuntimeError(f"the worker of detection trial {trial} exited before its kill")
        killed_at = time.time()
        worker.send_signal(signal.SIGKILL)
        status = wait_exit(worker, timeout=EXIT_SECONDS)
        took = wait_for_file(
            directory / f"takeover-{claimed['work_id']}.json",
            timeout=lease + TURN_SECONDS,
            proc=scanner,
        )
        rows.append(
            {
                "trial": trial,
                "seed": seed,
                "work_id": claimed["work_id"],
                "generation": claimed["generation"],
                "lease": claimed["lease"],
                "claimed_at": claimed["claimed_at"],
                "expires": claimed["expires"],
                "planned_offset": offset,
                "killed_at": killed_at,
                "exit_status": status,
                "turns": turns_of(directory / f"turns-{trial}.jsonl"),
                "takeover": took,
            }
        )
        bar.update()
    lab.stop_replacement(scanner, directory)
    return {"directory": directory.name, "lease": lease, "trials": rows}


def turns_of(path: Path) -> list[dict[str, Any]]:
    """The killed worker's turns from its log: each has a start,
    and an end unless it was cut short."""
    turns: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        turns.setdefault(record["turn"], {}).update(record)
    return [turns[number] for number in sorted(turns)]


# ------------------------------------------------------------------ 4. recovery


def recovery(
    backend: str,
    model: str | None,
    seed: int,
    samples: int,
    max_tokens: int,
    bar: tqdm,
    *,
    messages: list[dict] | None = None,
) -> dict[str, Any]:
    """``samples`` replies from one model to ``messages`` (default: the crashed transcript),
    with the recovery tools: text and tool calls of each."""
    chat = open_model(backend, model, seed=seed)
    messages = crashed_transcript(OPERATION) if messages is None else messages
    rows = []
    for _ in range(samples):
        reply = chat.chat(messages, RECOVERY_TOOLS, max_tokens=max_tokens)
        rows.append(
            {
                "text": reply.text,
                "tokens": reply.tokens,
                "seconds": reply.seconds,
                "calls": [
                    {"name": call.name, "arguments": call.arguments} for call in reply.tool_calls
                ],
            }
        )
        bar.update()
    return describe(chat) | {"seed": seed, "samples": rows}
