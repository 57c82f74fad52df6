"""The measurements of exercises 5 and 6, run with the answers' own pieces.

Exercise 5 (``measure_renewal``) is the Part A experiment's machinery with a renewer hook: its
pilot, false-expiry and detection phases (``lucyshop.lab.experiment.phases``) and worker roles
(``worker.py``), each worker given ``--answers PATH`` so that the answers' ``keep_renewing``
(and through it their ``renew``) keeps its lease, plus a phase of its own: two hung turns.
The answers' own run loads their files in its workers; the trusted side's run (the one
``make check`` grades) passes the chapter in its sandbox and a directory for the shops, and its
workers call the answers in sandboxes of their own (``lucyshop.lab.experiment.sandboxed``).
Exercise 6 (``measure_records``) is the experiment's recovery phase twice, on the crashed
transcript and on the same transcript with the answers' records message as its last message.
On the scripted stand-in (what ``make check`` grades on) exercise 5's phases after the pilot
run side by side, each in its own shop; on a real model one after another (``_phases``).
Exercise 5's shops are watched from this process while the phases run (``watch.LeaseWatch``):
each trial and hung turn carries what the watch saw of its lease (``watched``), and what is
judged of the renewer is that, never its rows' times or its ``report=`` entries alone.
Both write their receipt through ``lucyshop.lab.evidence.receipts``;
``lucyshop.lab.exercises.exercise_receipts`` derives and verifies its figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lucyshop import approval
from lucyshop.lab.evidence import receipts
from lucyshop.lab.exercises import exercise_receipts, renewal
from lucyshop.lab.exercises.watch import Change, LeaseWatch
from lucyshop.lab.experiment import phases
from lucyshop.lab.experiment.receipt import SAFE_LEASE_FACTOR, safe_lease
from lucyshop.lab.experiment.renewer import attempts, renewals
from lucyshop.lab.given import exercise_kit
from lucyshop.lab.given.orders import OPERATOR, OWNER, POLICY, VANILLA
from lucyshop.lab.given.renewals import prepare_renewals
from lucyshop.lab.model.backend import (
    GRADED,
    OLLAMA_HOST,
    TEMPERATURE,
    describe,
    model_argv,
    open_model,
)
from lucyshop.lab.model.tasks import OPERATION, RECOVERY_TOOLS, SUPPLIER, crashed_transcript
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    wait_exit,
    wait_for_file,
    wait_until,
)
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.supplier import ledger_orders

HERE = Path(__file__).resolve()
# the experiment and model code the runs drive, by sha256 in each receipt
DRIVERS = sorted(
    [*(HERE.parents[1] / "experiment").glob("*.py"), *(HERE.parents[1] / "model").glob("*.py")]
)
SCAN_SECONDS = 0.05
RENEW_SHARE = 1 / 3  # the renewer runs every third of a lease
WINDOW_FACTOR = 2.0  # how long the unbounded hung turn is watched: twice the bound
DEADLINE = 30.0
RENEWAL_PLANS = {
    "full": {"pilot": 20, "trials": 10, "detection": 10, "steps": 2, "max_tokens": 96},
    "quick": {"pilot": 3, "trials": 1, "detection": 1, "steps": 1, "max_tokens": 8},
}
ARMS = renewal.ARMS
RECORDS_PLANS = {
    "full": {"samples": 20, "max_tokens": 256},
    "quick": {"samples": 1, "max_tokens": 32},
}
OLLAMA_MODELS = ("qwen2.5:0.5b", "qwen2.5:1.5b")


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


def _command(answers: Path, exercise: int, quick: bool, out: Path) -> list[str]:
    return [str(answers), str(exercise), *(["--quick"] if quick else []), "--out", str(out)]


# ================================================================ exercise 5


@dataclasses.dataclass
class WatchedLab(phases.Lab):
    """The lab of exercise 5: every shop it makes is watched from this process, from before
    any worker starts until its phase is read back (``watched``)."""

    watches: dict[str, LeaseWatch] = dataclasses.field(default_factory=dict)
    # Phases side by side (``_phases``) open shops through one sandbox, which answers one call
    # at a time, and number their workers' logs from one count.
    turn: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def shop(self, name: str) -> tuple[Path, sqlite3.Connection]:
        with self.turn:
            directory, db = super().shop(name)
            watch = LeaseWatch(lambda: self.read(name), SCAN_SECONDS)
            watch.start()
            self.watches[name] = watch
        return directory, db

    def spawn(self, role: str, directory: Path, lease: float, *extra: str) -> subprocess.Popen:
        with self.turn:
            return super().spawn(role, directory, lease, *extra)

    def seen_since(self, name: str, held: dict[str, Any], moment: float) -> bool:
        """Whether the running watch of phase ``name`` saw the lease of ``held`` (its
        ``work_id`` and ``generation``) change after ``moment``, under that generation."""
        changes = self.watches[name].seen.get(held["work_id"], [])
        return any(at > moment and g == held["generation"] for at, g, _end in list(changes))

    def watched(self, name: str) -> dict[int, list[Change]]:
        """What the watch of phase ``name`` saw, by work id; the watch ends."""
        return self.watches.pop(name).stop()

    def end_watches(self) -> None:
        """End every watch still running (a phase that failed before its read-back)."""
        while self.watches:
            self.watches.popitem()[1].end()


def measure_renewal(
    out: Path,
    *,
    answers: Path,
    quick: bool = False,
    backend: str = "embedded",
    model: str | None = None,
    seed: int = 13,
    workdir: Path | None = None,
    progress: bool = False,
    leases: Any = None,
    shops: Path | None = None,
    open_shop: Callable[[Path], tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """Exercise 5 measured with the renewer of the ``answers`` file; the receipt goes to ``out``.

    Returns ``receipt`` (its path), ``figures``, ``observations``, ``settings`` and, with a
    ``workdir`` or ``shops``, ``shops``: the directories ``false-expiry``, ``detection`` and
    ``hung``, each holding the ``shop.db`` its phase used.

    The answers' own run loads their chapter here and their answers in its workers. The
    trusted side's run passes ``leases``, the chapter in its sandbox, with ``shops`` (a
    directory shared with the sandboxes) and ``open_shop`` (a shop paired with a connection of
    its own): its workers then call the chapter and the renewer in sandboxes of their own,
    and every worker's record, figure and the receipt are its own observations (``workdir``,
    never shown to a sandbox, keeps the records).
    """
    plan = RENEWAL_PLANS["quick" if quick else "full"]
    side_by_side = backend == GRADED
    impl = exercise_kit.chapter_path(answers)
    leases = exercise_kit.load_chapter(answers) if leases is None else leases
    chat = open_model(backend, model, seed=seed)
    described = describe(chat)
    del chat  # a missing model fails here; the workers load their own
    record = receipts.provenance(
        command=_command(answers, 5, quick, out),
        code=[impl, answers, HERE, *DRIVERS],
        model=described,
        backend=backend,
    )
    seeds = {
        "pilot": seed,
        "trials": seed + 100_000,
        "kill_offsets": seed,
        "detection": [seed + 400_000 + 1_000 * n for n in range(plan["detection"])],
        "hung": {"unbounded": seed + 600_000, "bounded": seed + 600_001},
    }
    with _workdir(workdir, "ch13-exercise5-") as tmp, SharedGroupChildren() as children:
        lab = WatchedLab(
            leases,
            impl,
            backend,
            model,
            plan["max_tokens"],
            SCAN_SECONDS,
            tmp,
            children,
            prepare=prepare_renewals,
            shops=shops,
            open_shop=open_shop,
        )
        try:
            with _bar(plan["pilot"], "5 pilot", progress) as bar:
                pilot = phases.pilot(lab, plan["pilot"], seeds["pilot"], bar)
            turns = [row["seconds"] for row in pilot["turns"]]
            lease = leases.percentile(turns, 50)
            bound = safe_lease(turns, leases)  # the renewer's bound
            lab.worker_args = (
                "--answers",
                str(answers),
                "--interval",
                repr(lease * RENEW_SHARE),
                "--bound",
                repr(bound),
            )
            schedule = [arm for _ in range(plan["trials"]) for arm in ARMS]
            offsets = phases.kill_offsets(lease, plan["detection"], seeds["kill_offsets"])

            def expiry_phase() -> dict[str, Any]:
                with _bar(len(schedule), "5 false expiry", progress) as bar:
                    found = phases.false_expiry(
                        lab, "median", lease, len(schedule), seeds["trials"], bar, arms=schedule
                    )
                _read_back(lab, found["directory"], found["trials"])
                return found

            def detection_phase() -> dict[str, Any]:
                with _bar(plan["detection"], "5 detection", progress) as bar:
                    found = phases.detection(lab, lease, offsets, seeds["detection"], bar)
                _read_back(lab, found["directory"], found["trials"])
                return found

            def hung_phase() -> dict[str, Any]:
                return _hung_turns(lab, lease, bound, plan["steps"], seeds["hung"])

            expiry, detection, hung = _phases(
                [expiry_phase, detection_phase, hung_phase], side_by_side
            )
        finally:
            lab.end_watches()
    observations = {
        "pilot": pilot.pop("turns"),
        "pilot_worker": pilot,
        "false_expiry": expiry,
        "detection": detection,
        "hung": hung,
    }
    settings = {
        "backend": backend,
        "model": described,
        "max_tokens": plan["max_tokens"],
        "temperature": TEMPERATURE,
        "pilot_turns": plan["pilot"],
        "trials_per_arm": plan["trials"],
        "detection_trials": plan["detection"],
        "hung_steps": plan["steps"],
        "arms": list(ARMS),
        "scan_seconds": SCAN_SECONDS,
        "renew_share": RENEW_SHARE,
        "bound_factor": SAFE_LEASE_FACTOR,
        "window_factor": WINDOW_FACTOR,
        "seed": seed,
        "seeds": seeds,
        "quick": quick,
        "phases_side_by_side": side_by_side,
        "impl": receipts.file_record(impl),
        "answers": receipts.file_record(answers),
    }
    receipt = exercise_receipts.close(5, record, settings, observations, leases)
    receipts.write_receipt(out, receipt)
    phase = {"false-expiry": expiry["directory"], "detection": "detection", "hung": "hung"}
    kept = workdir is not None or shops is not None
    return {
        "receipt": str(out),
        "figures": receipt["figures"],
        "observations": observations,
        "settings": settings,
        "shops": {k: str(lab.shop_file(v).parent) for k, v in phase.items()} if kept else {},
    }


def _phases(steps: Sequence[Callable[[], dict[str, Any]]], side_by_side: bool) -> list[dict]:
    """What each of ``steps`` (phases after the pilot, each in a shop of its own) returns, in
    order: one after another, or side by side in threads. The scripted stand-in's turns are
    sleeps, so its phases barely compete for the cores and what each one measures is the same
    side by side; a real model's turns would, so they run one after another."""
    if not side_by_side:
        return [step() for step in steps]
    with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="phase") as pool:
        running = [pool.submit(step) for step in steps]
        return [future.result() for future in running]


def _read_back(lab: WatchedLab, name: str, rows: list[dict[str, Any]]) -> None:
    """Add each row's lease as the watch saw it, and the answers' own record of their renewals:
    the rows (from the shop) and the renewer's ``report=`` entries (from its log)."""
    directory = lab.workdir / name
    seen = lab.watched(name)
    db = lab.read(name)
    try:
        for row in rows:
            row["watched"] = seen.get(row["work_id"], [])
            row["renewals"] = renewals(db, row["work_id"])
            row["attempts"] = attempts(directory / f"renewals-{row['work_id']}.jsonl")
    finally:
        db.close()


def _hung_turns(
    lab: WatchedLab, lease: float, bound: float, steps: int, seeds: dict[str, int]
) -> dict[str, dict[str, Any]]:
    """Two workers in one shop make ``steps`` steps and then hang; one renewer is unbounded.

    The bounded one must be taken over about a bound after its last progress. The unbounded
    one is watched for ``WINDOW_FACTOR`` bounds after its hang, then both are killed and the
    unbounded one's takeover, after the kill, is waited for.
    """
    directory, db = lab.shop("hung")
    try:
        scanner = lab.start_replacement(directory, lease)
        procs = {
            name: lab.spawn(
                "hung",
                directory,
                lease,
                "--name",
                name,
                "--steps",
                str(steps),
                *model_argv(lab.backend, lab.model, seeds[name]),
            )
            for name in ("unbounded", "bounded")
        }
        hung = {
            name: wait_for_file(
                directory / f"hung-{name}.json",
                timeout=phases.LOAD_SECONDS + steps * phases.TURN_SECONDS,
                proc=proc,
            )
            for name, proc in procs.items()
        }
        took_file = {name: directory / f"takeover-{hung[name]['work_id']}.json" for name in hung}
        bounded_took = wait_for_file(
            took_file["bounded"], timeout=bound + lease + DEADLINE, proc=scanner
        )
        time.sleep(max(0.0, hung["unbounded"]["hung_at"] + WINDOW_FACTOR * bound - time.time()))
        window_ended_at = time.time()
        in_window = (
            json.loads(took_file["unbounded"].read_text())
            if took_file["unbounded"].exists()
            else None
        )
        expires_at_window_end = db.execute(
            "SELECT expires FROM assignment_leases WHERE work_id = ?",
            (hung["unbounded"]["work_id"],),
        ).fetchone()["expires"]
        # The bounded renewer's next attempt after the takeover is refused: wait for it on its
        # log, not the clock, so that a busy machine does not kill the worker first. A
        # renewer that never asks again is killed at the deadline, and the receipt says so.
        bounded_log = directory / f"renewals-{hung['bounded']['work_id']}.jsonl"
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: refused(bounded_log), timeout=DEADLINE, what="a refused renewal")
        # The two turns hang at moments of their own: a bounded one that hung late is taken
        # over near the window's end. A live unbounded lease is extended within a lease of any
        # moment, so wait up to one for the watch to see it extended after that takeover.
        with contextlib.suppress(TimeoutError):
            wait_until(
                lambda: lab.seen_since(directory.name, hung["unbounded"], bounded_took["took_at"]),
                timeout=lease,
                what="the unbounded lease extended after the bounded takeover",
            )
        killed = {}
        for name, proc in procs.items():
            killed[name] = time.time()
            proc.send_signal(signal.SIGKILL)
            wait_exit(proc, timeout=phases.EXIT_SECONDS)
        unbounded_took = wait_for_file(
            took_file["unbounded"], timeout=lease + DEADLINE, proc=scanner
        )
        lab.stop_replacement(scanner, directory)
        seen = lab.watched(directory.name)
        result = {}
        for name, took in (("unbounded", unbounded_took), ("bounded", bounded_took)):
            work_id = hung[name]["work_id"]
            result[name] = {
                "hung": hung[name],
                "bound": None if name == "unbounded" else bound,
                "killed_at": killed[name],
                "takeover": took,
                "watched": seen.get(work_id, []),
                "outcome": phases.outcome(db, work_id),
                "renewals": renewals(db, work_id),
                "attempts": attempts(directory / f"renewals-{work_id}.jsonl"),
            }
        result["unbounded"] |= {
            "window": WINDOW_FACTOR * bound,
            "window_ended_at": window_ended_at,
            "takeover_in_window": in_window,
            "lease_expires_at_window_end": expires_at_window_end,
        }
        return result
    finally:
        db.close()


def refused(log: Path) -> bool:
    """Whether a renewer's log (whole lines only: it may be writing one) holds a refusal."""
    try:
        lines = log.read_text(encoding="utf-8").split("\n")[:-1]
    except FileNotFoundError:
        return False
    return any(not json.loads(line)["granted"] for line in lines if line)


# ================================================================ exercise 6


def measure_records(
    out: Path,
    *,
    answers: Path,
    message: Callable[[dict[str, Any]], str],
    quick: bool = False,
    backend: str = "embedded",
    models: Sequence[str] | None = None,
    seed: int = 13,
    workdir: Path | None = None,
    progress: bool = False,
    ollama: bool = True,
    leases: Any = None,
    kept: Path | None = None,
    open_shop: Callable[[Path], tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """Exercise 6 measured with the answers' records ``message``; the receipt goes to ``out``.

    Returns ``receipt`` (its path), ``figures``, ``observations``, ``settings`` and, with a
    ``workdir``, ``shop`` and ``ledger_file``: the records as the shop and the supplier hold them.

    The answers' own run loads their chapter file here. The trusted side's run (the one
    ``make check`` grades) passes ``leases``, the chapter in its sandbox, with ``open_shop``
    (the shop paired with a connection of its own), ``kept`` (where the supplier keeps its
    ledger, out of the sandbox's reach) and a ``message`` that calls into the sandbox: every
    record, sample and receipt is then its own observation.
    """
    plan = RECORDS_PLANS["quick" if quick else "full"]
    impl = exercise_kit.chapter_path(answers)
    leases = exercise_kit.load_chapter(answers) if leases is None else leases
    record = receipts.provenance(
        command=_command(answers, 6, quick, out),
        code=[impl, answers, HERE, *DRIVERS],
        backend=backend,
    )
    with _workdir(workdir, "ch13-exercise6-") as tmp:
        made = crashed_records(leases, tmp / "records", kept=kept, open_shop=open_shop)
    operation = made["order"]["operation"]
    if operation != OPERATION:
        raise RuntimeError(f"the shop's operation {operation} is not the experiment's {OPERATION}")
    plain = crashed_transcript(operation)
    given = [*plain[:-1], {"role": "user", "content": message(made["order"])}]
    chosen = [(backend, name) for name in (models or [None])]
    skipped = None
    if ollama and backend == "embedded":
        found, skipped = _ollama_models(OLLAMA_MODELS)
        chosen += [("ollama", name) for name in found]
    sampled: dict[str, Any] = {}
    with _bar(2 * plan["samples"] * len(chosen), "6 recovery", progress) as bar:
        for number, (which, name) in enumerate(chosen):
            model_seed = seed + 500_000 + 10_000 * number
            arms = {
                arm: phases.recovery(
                    which, name, model_seed, plan["samples"], plan["max_tokens"], bar, messages=m
                )
                for arm, m in (("plain", plain), ("records", given))
            }
            described = {k: v for k, v in arms["plain"].items() if k != "samples"}
            sampled[described["name"]] = described | {
                "backend": which,
                "plain": arms["plain"]["samples"],
                "records": arms["records"]["samples"],
            }
    observations = {
        "operation": operation,
        "records": made,
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
        "impl": receipts.file_record(impl),
        "answers": receipts.file_record(answers),
    }
    record["model"] = {"name": ", ".join(sampled)}
    receipt = exercise_receipts.close(6, record, settings, observations, leases)
    receipts.write_receipt(out, receipt)
    return {
        "receipt": str(out),
        "figures": receipt["figures"],
        "observations": observations,
        "settings": settings,
        "shop": made["shop"] if workdir is not None else None,
        "ledger_file": made["ledger_file"] if workdir is not None else None,
    }


def crashed_records(
    leases: Any,
    directory: Path,
    *,
    kept: Path | None = None,
    open_shop: Callable[[Path], tuple[Any, Any]] | None = None,
) -> dict[str, Any]:
    """A worker sends the order; the supplier commits it and drops the reply; the worker stops
    there. Returns the order as the shop records it and the ledger as the supplier does.

    The supplier keeps its ledger under ``kept`` (default: ``directory``); ``open_shop``
    (default: ``leases.open_worker_shop``) opens the shop."""
    directory.mkdir(parents=True, exist_ok=True)
    shop = directory / "shop.db"
    supplier_home = (kept if kept is not None else directory) / "supplier"
    with supplier_process(supplier_home, identity=SUPPLIER) as supplier:
        supplier.set_faults(drop_next=1)
        db, queue = (open_shop or leases.open_worker_shop)(shop)
        try:
            work_id = leases.enqueue(
                queue,
                "records-1",
                "session-a",
                "Please order six tubs of vanilla (sku vanilla-tub) for the weekend.",
            )
            held = leases.claim(db, OWNER, ttl=30)
            order = approval.propose(db, held, supplier=SUPPLIER, proposal=VANILLA)
            approval.approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=POLICY)
            sent = approval.execute(
                db, held, order["id"], supplier.client(timeout=2.0), policy=POLICY
            )
            row = approval.get_order(db, order["id"])
            kept = ("id", "operation", "supplier", "proposal", "amount_cents", "status")
            return {
                "shop": str(shop),
                "ledger_file": str(supplier.database),
                "work_id": work_id,
                "worker_id": held.worker_id,
                "send_result": sent,
                "order": {key: row[key] for key in kept},
                "account": approval.account(db),
                "ledger": ledger_orders(supplier.database),
            }
        finally:
            db.close()


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
