"""Section ``queues``: the kit's claim cycle beside litequeue and persist-queue, one run, one
file system.

Every cell copies a queue file filled once per (engine, size), hands it to a pool of 1, 4 or
8 worker processes at one synchronous setting, releases them together and lets them cycle
for ``--seconds`` or until half the queue is taken, whichever comes first (so a 300-item
queue is measured between 300 and 150 queued). Cycles/s is every item completed over the
time from the release to the last completion. Cells are interleaved (each repeat walks every
engine at one size before the next size) so the machine's drift hits all of them alike.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lucyshop.proof.bench.engines import SYNCS, WORKLOADS, copy_queue, peers_installed
from lucyshop.proof.bench.pool import Pool
from lucyshop.proof.bench.stats import Target, percentile, spread

NAME = "queues"
SIZES = (300, 3_000, 9_900)
PROCESSES = (1, 4, 8)
KIT, KIT_OBSERVE = ("kit", "claim+finish"), ("kit", "claim+observe+finish")
PEERS = (("litequeue", "pop+done"), ("persist-queue", "get+ack"))
CELL_TIMEOUT = 300.0


def workloads() -> list[tuple[str, str]]:
    if peers_installed():
        return list(WORKLOADS)
    print(
        "  queues: litequeue and persist-queue are not installed (pip install -e '.[bench]')",
        file=sys.stderr,
    )
    return [KIT, KIT_OBSERVE]


def templates(directory: Path, impl: Path, chosen: Iterable[tuple[str, str]], sizes) -> dict:
    """One filled queue file per (engine, size); every cell starts from a copy."""
    made = {}
    for key in chosen:
        for size in sizes:
            path = directory / "templates" / f"{key[0]}-{key[1]}-{size}" / "queue.db"
            path.parent.mkdir(parents=True)
            WORKLOADS[key](impl).fill(path, size)
            made[key, size] = path
    return made


def cell_result(records: list[dict[str, Any]], size: int) -> dict[str, Any]:
    taken = [item for r in records for item in r["taken"]]
    takes = [t for r in records for t in r["takes"]]
    start = min(r["start"] for r in records)
    elapsed = max(r["last"] for r in records) - start
    return {
        "cycles_per_s": len(taken) / elapsed if elapsed > 0 else 0.0,
        "cycles": len(taken),
        "duplicates": len(taken) - len(set(taken)),
        "lock_errors": sum(r["lock_errors"] for r in records),
        "take_p50_ms": 1000 * percentile(takes, 50) if takes else None,
        "take_p99_ms": 1000 * percentile(takes, 99) if takes else None,
        "take_max_ms": 1000 * max(takes) if takes else None,
        "start_skew_ms": 1000 * (max(r["start"] for r in records) - start),
        "queued": size,
    }


def measure(options: argparse.Namespace) -> dict[str, Any]:
    chosen = workloads()
    cells: dict[str, list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="ch13-bench-") as tmp:
        directory = Path(tmp)
        made = templates(directory, options.impl_path, chosen, options.sizes)
        for processes in options.processes:
            with Pool(directory / f"pool-{processes}", processes, options.impl_path) as pool:
                for repeat in range(options.repeats):
                    for sync in SYNCS:
                        for size in options.sizes:
                            for key in chosen:
                                path = directory / "cells" / f"{processes}-{repeat}" / "queue.db"
                                copy_queue(made[key, size], path)
                                cell = {
                                    "engine": key[0],
                                    "cycle": key[1],
                                    "path": str(path),
                                    "sync": sync,
                                    "seconds": options.seconds,
                                    "max_cycles": -(-size // (2 * processes)),
                                }
                                records = pool.run(cell, timeout=CELL_TIMEOUT)
                                row = f"{key[0]} {key[1]} {sync} {size} {processes}"
                                cells[row].append(cell_result(records, size))
            print(f"  queues: {processes} process(es) measured", file=sys.stderr)
    return {
        "rows": summarise(cells),
        "sizes": list(options.sizes),
        "processes": list(options.processes),
        "seconds": options.seconds,
    }


def summarise(cells: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for name, runs in cells.items():
        engine, cycle, sync, size, processes = name.split()
        row = {
            "engine": engine,
            "cycle": cycle,
            "sync": sync,
            "queued": int(size),
            "processes": int(processes),
        }
        for key in ("cycles_per_s", "take_p50_ms", "take_p99_ms", "take_max_ms", "start_skew_ms"):
            values = [r[key] for r in runs if r[key] is not None]
            row[key] = spread(values) if values else None
        row["duplicates"] = max(r["duplicates"] for r in runs)
        row["lock_errors"] = sum(r["lock_errors"] for r in runs)
        row["cycles"] = sum(r["cycles"] for r in runs)
        rows.append(row)
    add_ratios(rows)
    return rows


def find(rows, engine, cycle, sync, queued, processes) -> dict[str, Any] | None:
    for row in rows:
        if (row["engine"], row["cycle"], row["sync"], row["queued"], row["processes"]) == (
            engine,
            cycle,
            sync,
            queued,
            processes,
        ):
            return row
    return None


def rate(row: dict[str, Any] | None) -> float | None:
    return None if row is None or row["cycles_per_s"] is None else row["cycles_per_s"]["median"]


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Per kit row: its rate over each peer's at the same sync setting, size and processes."""
    for row in rows:
        if row["engine"] != "kit":
            continue
        where = (row["sync"], row["queued"], row["processes"])
        for peer in PEERS:
            peer_rate = rate(find(rows, *peer, *where))
            if peer_rate:
                row[f"vs_{peer[0]}"] = rate(row) / peer_rate
        plain = rate(find(rows, *KIT, *where))
        if row["cycle"] == KIT_OBSERVE[1] and plain:
            row["vs_claim_finish"] = rate(row) / plain


# ------------------------------------------------------------------ the table and the targets

# Why a target can be missed, as the measurements explain it; printed beside a missed target.
PERSIST_QUEUE_DOES_LESS = (
    "persist-queue's get reads the next item outside any write transaction and marks it in a "
    "second one that writes one table page (no index, no lease, no outcome): cheaper per "
    "commit, but with several processes it hands one item to two of them (its duplicates "
    "above). The kit reads under BEGIN IMMEDIATE and writes 4-5 pages a commit; at FULL the "
    "fsync narrows that difference, at NORMAL nothing does"
)
REASONS: dict[str, str] = {
    "persist-queue 1.0": PERSIST_QUEUE_DOES_LESS,
    "persist-queue 0.5": PERSIST_QUEUE_DOES_LESS,
    "litequeue 0.5": (
        "at 300 queued litequeue's single UPDATE ... RETURNING sorts only the few ready rows "
        "and writes no lease, no outcome and no holder check"
    ),
}


def lines(result: dict[str, Any]) -> list[str]:
    rows = result["rows"]
    out = [
        "queues: cycles/s (median of repeats); kit/peer ratios at the same synchronous setting",
        (
            f"  {'sync':<6} {'queued':>6} {'procs':>5} | {'claim+fin':>9} {'+observe':>8} | "
            f"{'litequeue':>9} {'persistq':>8} | {'kit/lq':>6} {'kit/pq':>6} | "
            f"{'claim p99':>9} {'dups':>4} {'locks':>5}"
        ),
    ]
    for sync in SYNCS:
        for size in result["sizes"]:
            for processes in result["processes"]:
                where = (sync, size, processes)
                kit = find(rows, *KIT, *where)
                out.append(
                    f"  {sync:<6} {size:>6} {processes:>5} | {fmt(rate(kit), 9)} "
                    f"{fmt(rate(find(rows, *KIT_OBSERVE, *where)), 8)} | "
                    f"{fmt(rate(find(rows, *PEERS[0], *where)), 9)} "
                    f"{fmt(rate(find(rows, *PEERS[1], *where)), 8)} | "
                    f"{fmt(kit and kit.get('vs_litequeue'), 6, 2)} "
                    f"{fmt(kit and kit.get('vs_persist-queue'), 6, 2)} | "
                    f"{fmt(kit and kit['take_p99_ms'] and kit['take_p99_ms']['median'], 9, 1)} "
                    f"{kit_total(rows, where, 'duplicates'):>4} "
                    f"{kit_total(rows, where, 'lock_errors'):>5}"
                )
    peers = [r for r in rows if r["engine"] != "kit" and (r["duplicates"] or r["lock_errors"])]
    for row in peers:
        out.append(
            f"  note: {row['engine']} at {row['sync']}, {row['queued']} queued, "
            f"{row['processes']} procs: {row['duplicates']} duplicates, "
            f"{row['lock_errors']} lock errors"
        )
    return out


def fmt(value: float | None, width: int, digits: int = 0) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def kit_total(rows: list[dict[str, Any]], where: tuple, key: str) -> int:
    return sum((find(rows, *kit, *where) or {}).get(key, 0) for kit in (KIT, KIT_OBSERVE))


def ratio_target(name: str, cases: list[tuple[str, float | None]], floor: float, kind: str):
    """Held when every measured case is at or above ``floor``; the figure names the worst."""
    measured = [(where, value) for where, value in cases if value is not None]
    if not measured:
        return Target(name, False, "not measured", "the cells were not run")
    worst = min(measured, key=lambda case: case[1])
    missed = [f"{where} {value:.2f}x" for where, value in measured if value < floor]
    figure = f"worst {worst[1]:.2f}x ({worst[0]}) over {len(measured)} cells"
    reason = "; ".join(missed)
    if missed and kind in REASONS:
        reason += f". {REASONS[kind]}"
    return Target(name, not missed, figure, reason)


def targets(result: dict[str, Any]) -> list[Target]:
    rows, sizes, procs = result["rows"], result["sizes"], result["processes"]
    found = []
    if 300 in sizes and 9_900 in sizes:
        cases = [
            (
                f"{sync} {p}p",
                ratio(rate(find(rows, *KIT, sync, 9_900, p)), rate(find(rows, *KIT, sync, 300, p))),
            )
            for sync in SYNCS
            for p in procs
        ]
        found.append(
            ratio_target(
                "claim+finish at 9,900 queued >= 0.7x its rate at 300", cases, 0.7, "scaling"
            )
        )
    for peer in PEERS:
        key = f"vs_{peer[0]}"
        for label, chosen, floor in (
            ("3,000 and 9,900", (3_000, 9_900), 1.0),
            ("300", (300,), 0.5),
        ):
            cases = [
                (f"{row['sync']} {row['queued']} {row['processes']}p", row.get(key))
                for row in rows
                if (row["engine"], row["cycle"]) == KIT and row["queued"] in chosen
            ]
            if cases:
                found.append(
                    ratio_target(
                        f"claim+finish >= {floor}x {peer[0]} at {label} queued, equal durability",
                        cases,
                        floor,
                        f"{peer[0]} {floor}",
                    )
                )
    kit_rows = [r for r in rows if r["engine"] == "kit"]
    dups = sum(r["duplicates"] for r in kit_rows)
    locks = sum(r["lock_errors"] for r in kit_rows)
    found.append(
        Target(
            "0 duplicates and 0 lock errors in every kit cell",
            dups == 0 and locks == 0,
            f"{dups} duplicates, {locks} lock errors",
        )
    )
    most = [
        r for r in kit_rows if r["processes"] == max(procs) and r["cycle"] == KIT[1] and r["cycles"]
    ]
    if most:
        p99 = [r["take_p99_ms"]["median"] for r in most]
        longest = max(r["take_max_ms"]["max"] for r in most)
        found.append(
            Target(
                f"p99 claim latency at {max(procs)} processes (no target)",
                True,
                f"{min(p99):.1f}-{max(p99):.1f} ms over sizes and settings; "
                f"the longest claim {longest:.0f} ms",
            )
        )
    return found


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b
