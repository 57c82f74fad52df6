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
    seconds = []
    for _ in range(options.repeats):
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


def lines(result: dict[str, Any]) -> list[str]:
    return [f"feedback: make check on the solutions {result['make_check_s']['median']:.1f} s warm"]
