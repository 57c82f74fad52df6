"""``make bench``: how fast the protocol runs, measured as ratios against limits taken in the \
same run.

    python -m lucyshop.lab.bench --out evidence/bench.json [--impl solutions] [--repeats 3]

1. claim cycles (claim -> observe -> finish) with 1, 2, 4 and 8 worker processes on one
   WAL file, against a bare ``BEGIN IMMEDIATE; UPDATE; COMMIT`` loop on the same file with
   the same pragmas and the same number of processes. A cycle commits three transactions,
   so its limit is the bare rate divided by three; duplicates must be 0.
2. fence cost: ``observe`` (holder check + insert) against the same insert without the check.
3. checkpoint time: the real lease waits against everything else (process and server start).
4. detection accuracy: |measured - predicted| mean detection delay in the committed receipt,
   as a share of the scan interval.
5. feedback time: ``make check``'s report on the solutions with a warm environment.

Every figure is a median over repeats with its spread (min, max). Nothing here asserts a
speed: the machines are shared, so the figures are reported, never tested against a clock.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lucyshop.lab.loader import ROOT, impl_path, load_impl
from lucyshop.lab.processes import Children, python_argv, wait_exit, wait_for_file, write_ready
from lucyshop.store import connect, immediate

PROCESSES = (1, 2, 4, 8)
COMMITS_PER_CYCLE = 3
DEADLINE = 300.0


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


# ------------------------------------------------------------------ worker processes


def worker(args: argparse.Namespace) -> int:
    """Wait for the start file, then either cycle claims until the queue is empty or run bare
    commits."""
    directory = Path(args.dir)
    if args.mode == "cycle":
        leases = load_impl()
        db, _ = leases.open_worker_shop(directory / "shop.db")
    else:
        db = connect(directory / "shop.db")
    write_ready(directory / f"ready-{args.index}.json", {"pid": os.getpid()})
    wait_for_file(directory / "go.json", timeout=DEADLINE)
    latencies, claimed = [], []
    if args.mode == "cycle":
        while True:
            start = time.perf_counter()
            held = leases.claim(db, f"bench-{args.index}", ttl=600)
            latencies.append(time.perf_counter() - start)
            if held is None:
                break
            claimed.append([held.work_id, held.generation])
            leases.observe(db, held, {"role": "assistant", "text": "ok"})
            leases.finish(db, held, "DONE", {"ok": True})
    else:
        for _ in range(args.count):
            with immediate(db):
                db.execute("UPDATE bench_counter SET n = n + 1 WHERE id = ?", (args.index,))
    write_ready(
        directory / f"done-{args.index}.json",
        {"finished": time.time(), "claim_latencies": latencies, "claimed": claimed},
    )
    return 0


def run_workers(
    directory: Path, mode: str, processes: int, impl: Path, count: int = 0
) -> list[dict[str, Any]]:
    """Start ``processes`` workers, release them together, and return their reports plus the start
    time."""
    for stale in directory.glob("*-*.json"):
        stale.unlink()
    (directory / "go.json").unlink(missing_ok=True)
    env = os.environ | {"LEASES_IMPL": str(impl)}
    with Children() as children:
        procs = [
            children.spawn(
                python_argv(
                    "lucyshop.lab.bench",
                    "--worker",
                    "--mode",
                    mode,
                    "--dir",
                    str(directory),
                    "--index",
                    str(i),
                    "--count",
                    str(count),
                ),
                env=env,
            )
            for i in range(processes)
        ]
        for i, proc in enumerate(procs):
            wait_for_file(directory / f"ready-{i}.json", timeout=60, proc=proc)
        start = time.time()
        write_ready(directory / "go.json", {"start": start})
        reports = [
            wait_for_file(directory / f"done-{i}.json", timeout=DEADLINE, proc=proc)
            for i, proc in enumerate(procs)
        ]
        for proc in procs:
            wait_exit(proc, timeout=30)
    return [report | {"start": start} for report in reports]


def claim_cycles(impl: Path, processes: int, items: int) -> dict[str, Any]:
    """One measurement: ``items`` cycles by ``processes`` workers,
    and the bare commit rate beside it."""
    leases = load_impl(impl)
    with tempfile.TemporaryDirectory(prefix="ch13-bench-") as tmp:
        directory = Path(tmp)
        db, queue = leases.open_worker_shop(directory / "shop.db")
        for i in range(items):
            leases.enqueue(queue, f"bench-{i}", f"session-{i}", "one short turn")
        db.execute("CREATE TABLE bench_counter(id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
        db.executemany("INSERT INTO bench_counter VALUES (?, 0)", [(i,) for i in range(processes)])
        reports = run_workers(directory, "cycle", processes, impl)
        elapsed = max(r["finished"] for r in reports) - reports[0]["start"]
        claimed = [tuple(c) for r in reports for c in r["claimed"]]
        outcomes = db.execute("SELECT count(*) FROM outcomes").fetchone()[0]
        per_worker = COMMITS_PER_CYCLE * items // processes
        bare = run_workers(directory, "bare", processes, impl, count=per_worker)
        bare_elapsed = max(r["finished"] for r in bare) - bare[0]["start"]
        db.close()
    latencies = sorted(x for r in reports for x in r["claim_latencies"])
    cycles = items / elapsed
    limit = per_worker * processes / bare_elapsed / COMMITS_PER_CYCLE
    return {
        "cycles_per_s": cycles,
        "bare_commits_per_s": per_worker * processes / bare_elapsed,
        "limit_cycles_per_s": limit,
        "ratio": cycles / limit,
        "claim_p50_ms": 1000 * latencies[len(latencies) // 2],
        "claim_p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "duplicates": len(claimed) - len({work for work, _ in claimed}),
        "unclaimed": items - len({work for work, _ in claimed}),
        "outcome_rows": outcomes,
    }


# ------------------------------------------------------------------ in-process figures


def fence_cost(impl: Path, rounds: int, repeats: int) -> dict[str, Any]:
    """``observe`` with its holder check against the bare insert, interleaved so drift hits both."""
    leases = load_impl(impl)
    with tempfile.TemporaryDirectory(prefix="ch13-fence-") as tmp:
        db, queue = leases.open_worker_shop(Path(tmp) / "shop.db")
        leases.enqueue(queue, "fence", "session", "one turn")
        held = leases.claim(db, "bench", ttl=3600)
        fenced, bare = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(rounds):
                leases.observe(db, held, {"text": "x"})
            fenced.append((time.perf_counter() - start) / rounds)
            start = time.perf_counter()
            for _ in range(rounds):
                with immediate(db):
                    db.execute(
                        "INSERT INTO transcript(work_id, generation, message) VALUES (?, ?, ?)",
                        (held.work_id, held.generation, json.dumps({"text": "x"})),
                    )
            bare.append((time.perf_counter() - start) / rounds)
        db.close()
    ratios = [f / b for f, b in zip(fenced, bare)]
    return {
        "observe_ms": spread([1000 * f for f in fenced]),
        "bare_insert_ms": spread([1000 * b for b in bare]),
        "ratio": spread(ratios),
    }


def checkpoint_time(impl: Path, repeats: int) -> dict[str, Any]:
    waits, totals = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="ch13-bench-cp-") as tmp:
            evidence = Path(tmp) / "evidence.json"
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "checkpoints" / "ch13_worker_recovery.py"),
                    "--impl",
                    str(impl),
                    "--evidence",
                    str(evidence),
                ],
                check=True,
                capture_output=True,
                timeout=300,
            )
            data = json.loads(evidence.read_text())
        totals.append(data["seconds"])
        waits.append(sum(case.get("waited_seconds", 0) for case in data["cases"].values()))
    return {
        "total_s": spread(totals),
        "lease_wait_s": spread(waits),
        "lease_wait_share": spread([w / t for w, t in zip(waits, totals)]),
    }


def detection_accuracy(receipt: Path) -> dict[str, Any] | None:
    if not receipt.exists():
        return None
    data = json.loads(receipt.read_text())
    detection = data["figures"]["detection"]
    scan = detection["scan"]
    error = abs(detection["measured_mean_delay"] - detection["predicted_delay"])
    return {
        "receipt": str(receipt.relative_to(ROOT)),
        "abs_error_s": error,
        "scan_s": scan,
        "share_of_scan": error / scan,
    }


def feedback_time(repeats: int) -> dict[str, Any]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "lucyshop.lab.report", "--impl", "solutions"],
            check=True,
            capture_output=True,
            timeout=300,
            cwd=ROOT,
        )
        seconds.append(time.perf_counter() - start)
    return {"make_check_s": spread(seconds)}


# ------------------------------------------------------------------ the report


def measure(args: argparse.Namespace) -> dict[str, Any]:
    impl = impl_path(args.impl)
    cycles = {}
    for processes in PROCESSES:
        runs = [claim_cycles(impl, processes, args.items) for _ in range(args.repeats)]
        cycles[str(processes)] = {key: spread([r[key] for r in runs]) for key in runs[0]}
        print(
            f"  claim cycles, {processes} process(es): "
            f"{cycles[str(processes)]['cycles_per_s']['median']:.0f}/s",
            file=sys.stderr,
        )
    return {
        "schema": 1,
        "measured_utc": datetime.now(UTC).isoformat(),
        "command": sys.argv,
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "load_average_start": os.getloadavg(),
        "impl": str(impl.relative_to(ROOT)) if impl.is_relative_to(ROOT) else str(impl),
        "claim_cycles": cycles,
        "fence_cost": fence_cost(impl, args.rounds, args.repeats),
        "checkpoint": checkpoint_time(impl, args.repeats),
        "detection": detection_accuracy(ROOT / "evidence" / "ch13-leases-receipt.json"),
        "feedback": feedback_time(args.repeats),
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        "claim cycles (claim -> observe -> finish), median of repeats",
        (
            f"  {'procs':>5} {'cycles/s':>9} {'limit/s':>8} {'ratio':>6} "
            f"{'p50 ms':>7} {'p99 ms':>7} {'dups':>5}"
        ),
    ]
    for processes, row in report["claim_cycles"].items():
        lines.append(
            f"  {processes:>5} {row['cycles_per_s']['median']:9.0f} "
            f"{row['limit_cycles_per_s']['median']:8.0f} {row['ratio']['median']:6.2f} "
            f"{row['claim_p50_ms']['median']:7.2f} {row['claim_p99_ms']['median']:7.2f} "
            f"{int(row['duplicates']['max']):5d}"
        )
    fence = report["fence_cost"]
    lines.append(
        f"fence cost: observe {fence['observe_ms']['median']:.3f} ms vs bare insert "
        f"{fence['bare_insert_ms']['median']:.3f} ms, ratio {fence['ratio']['median']:.2f} "
        f"({fence['ratio']['min']:.2f}-{fence['ratio']['max']:.2f})"
    )
    cp = report["checkpoint"]
    lines.append(
        f"checkpoint: {cp['total_s']['median']:.1f} s total, {cp['lease_wait_s']['median']:.1f} s "
        f"real lease waits ({100 * cp['lease_wait_share']['median']:.0f}%)"
    )
    if report["detection"]:
        d = report["detection"]
        lines.append(
            f"detection: |measured - predicted| = {1000 * d['abs_error_s']:.1f} ms = "
            f"{d['share_of_scan']:.2f} of the {1000 * d['scan_s']:.0f} ms scan"
        )
    else:
        lines.append("detection: no committed receipt to read")
    lines.append(
        "feedback: make check on the solutions "
        f"{report['feedback']['make_check_s']['median']:.1f} s warm"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--impl", default="solutions")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("cycle", "bare"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    report = measure(args)
    report["load_average_end"] = os.getloadavg()
    print(table(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
