"""Section ``fence``: ``observe`` (holder check + insert) against the same insert without the
holder check, interleaved so the machine's drift hits both."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from lucyshop.lab.bench.stats import Target, spread
from lucyshop.lab.loader import load_impl

NAME = "fence"
LIMIT = 1.3


def measure(options: argparse.Namespace) -> dict[str, Any]:
    leases = load_impl(options.impl_path)
    with tempfile.TemporaryDirectory(prefix="ch13-fence-") as tmp:
        db, queue = leases.open_worker_shop(Path(tmp) / "shop.db")
        leases.enqueue(queue, "fence", "session", "one turn")
        held = leases.claim(db, "bench", ttl=3600)
        fenced, bare = [], []
        for _ in range(options.repeats):
            start = time.perf_counter()
            for _ in range(options.rounds):
                leases.observe(db, held, {"text": "x"})
            fenced.append((time.perf_counter() - start) / options.rounds)
            start = time.perf_counter()
            for _ in range(options.rounds):
                with db.immediate():
                    db.execute(
                        "INSERT INTO transcript(work_id, generation, message) VALUES (?, ?, ?)",
                        (held.work_id, held.generation, json.dumps({"text": "x"})),
                    )
            bare.append((time.perf_counter() - start) / options.rounds)
        db.close()
    return {
        "observe_ms": spread([1000 * f for f in fenced]),
        "bare_insert_ms": spread([1000 * b for b in bare]),
        "ratio": spread([f / b for f, b in zip(fenced, bare, strict=True)]),
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
