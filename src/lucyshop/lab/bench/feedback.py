"""Section ``feedback``: ``make check``'s report on the solutions, with a warm environment."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

from lucyshop.lab.bench.stats import spread
from lucyshop.lab.loader import ROOT

NAME = "feedback"


def measure(options: argparse.Namespace) -> dict[str, Any]:
    """The time to a report; its exit status is kept beside it (without the embedded model the
    exercise 5 and 6 rows fail, which changes what is timed, so the report says so)."""
    seconds, statuses = [], []
    for _ in range(options.repeats):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "lucyshop.lab.report", "--impl", "solutions"],
            check=False,
            capture_output=True,
            timeout=300,
            cwd=ROOT,
        )
        seconds.append(time.perf_counter() - start)
        statuses.append(done.returncode)
    return {"make_check_s": spread(seconds), "exit_statuses": statuses}


def lines(result: dict[str, Any]) -> list[str]:
    statuses = set(result["exit_statuses"])
    note = "" if statuses == {0} else f" (the report exited {sorted(statuses)}: rows failed)"
    return [
        f"feedback: make check on the solutions {result['make_check_s']['median']:.1f} s warm{note}"
    ]
