"""Section ``fence``: ``observe`` (holder check + insert) against the same insert without the
holder check, paired write by write so the machine's drift hits both (measured in blocks of
500 of one kind, then of the other, the ratio read 1.06x, 1.44x and 3.63x on one code)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lucyshop.lab.loader import load_impl
from lucyshop.proof.bench.stats import Target, spread

NAME = "fence"
LIMIT = 1.3


def measure(options: argparse.Namespace) -> dict[str, Any]:
    """Each repeat times ``rounds`` pairs, one fenced write and one bare write, alternating
    which goes first, and compares their medians: load that comes and goes lands on both
    sides of a pair, where blocks of one kind then the other let it land on one."""
    leases = load_impl(options.impl_path)
    with tempfile.TemporaryDirectory(prefix="ch13-fence-") as tmp:
        db, queue = leases.open_worker_shop(Path(tmp) / "shop.db")
        leases.enqueue(queue, "fence", "session", "one turn")
        held = leases.claim(db, "bench", ttl=3600)

        def fenced() -> None:
            leases.observe(db, held, {"text": "x"})

        def bare() -> None:
            with db.immediate():
                db.execute(
                    "INSERT INTO transcript(work_id, generation, message) VALUES (?, ?, ?)",
                    (held.work_id, held.generation, json.dumps({"text": "x"})),
                )

        medians: list[tuple[float, float]] = []
        for _ in range(options.repeats):
            times: dict[Any, list[float]] = {fenced: [], bare: []}
            for n in range(options.rounds):
                for write in (fenced, bare) if n % 2 == 0 else (bare, fenced):
                    start = time.perf_counter()
                    write()
                    times[write].append(time.perf_counter() - start)
            medians.append((statistics.median(times[fenced]), statistics.median(times[bare])))
        db.close()
    return {
        "observe_ms": spread([1000 * f for f, _ in medians]),
        "bare_insert_ms": spread([1000 * b for _, b in medians]),
        "ratio": spread([f / b for f, b in medians]),
    }


def lines(result: dict[str, Any]) -> list[str]:
    return [
        (
            f"fence cost: observe {result['observe_ms']['median']:.3f} ms vs bare insert "
            f"{result['bare_insert_ms']['median']:.3f} ms, ratio {result['ratio']['median']:.2f} "
            f"({result['ratio']['min']:.2f}-{result['ratio']['max']:.2f})"
        )
    ]


def targets(result: dict[str, Any]) -> list[Target]:
    median = result["ratio"]["median"]
    return [Target(f"fence cost <= {LIMIT}x", median <= LIMIT, f"{median:.2f}x (median)")]
