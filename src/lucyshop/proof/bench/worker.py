"""One bench worker process: runs the cells its pool hands it, one after another, until told to
stop.

    python -m lucyshop.proof.bench.worker --dir DIR --index N --impl PATH

For cell ``k`` the pool writes ``cell-k.json`` (which queue file, workload, synchronous
setting, time and item budget); the worker opens that queue, writes ``ready-k-N.json``, waits
for ``go-k.json``, cycles until the budget or the queue runs out, and writes ``done-k-N.json``
with what it took. A lock error is counted and the worker goes on: its record says how many.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from lucyshop.lab.services.processes import wait_for_file, write_ready
from lucyshop.proof.bench.engines import WORKLOADS

DEADLINE = 600.0  # the longest a worker waits for its next cell before it gives up
GO_POLL_S = 0.001


def wait_for_go(path: Path) -> float:
    """Spin (1 ms sleeps) until the pool's go file exists; the start is this process's clock."""
    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path.name} within {DEADLINE:.0f}s")
        time.sleep(GO_POLL_S)
    return time.time()


def run_cell(engine: Any, cell: dict[str, Any], directory: Path, tag: str) -> dict[str, Any]:
    engine.open(Path(cell["path"]), cell["sync"])
    try:
        write_ready(directory / f"ready-{tag}.json", {"pid": os.getpid()})
        start = wait_for_go(directory / f"go-{cell['k']}.json")
        stop = start + cell["seconds"]
        taken, takes, lock_errors, last = [], [], 0, start
        while len(taken) < cell["max_cycles"] and time.time() < stop:
            try:
                done = engine.cycle()
            except sqlite3.OperationalError as error:
                if "locked" not in str(error):
                    raise
                lock_errors += 1
                continue
            if done is None:
                break
            taken.append(done[0])
            takes.append(done[1])
            last = time.time()
    finally:
        engine.close()
    return {
        "start": start,
        "last": last,
        "taken": taken,
        "takes": takes,
        "lock_errors": lock_errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--impl", type=Path, required=True)
    args = parser.parse_args(argv)
    engines: dict[tuple[str, str], Any] = {}
    for k in range(10**6):
        cell = wait_for_file(args.dir / f"cell-{k}.json", timeout=DEADLINE)
        if cell.get("stop"):
            return 0
        key = (cell["engine"], cell["cycle"])
        if key not in engines:
            engines[key] = WORKLOADS[key](args.impl)
            if hasattr(engines[key], "owner"):
                engines[key].owner = f"bench-{args.index}"
        tag = f"{k}-{args.index}"
        record = run_cell(engines[key], cell, args.dir, tag)
        write_ready(args.dir / f"done-{tag}.json", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
