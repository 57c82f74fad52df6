"""Section ``feedback``: how long a student waits for ``make check`` and for one printed rerun.

Both come from ``report.timings()`` on the solutions, in a warm environment. Without the
embedded model the exercise 5 and 6 rows say NEEDS MODEL instead of running real turns, which
changes what is timed, so the section records whether the model was there.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from lucyshop.lab.bench.stats import Target, spread
from lucyshop.lab.report import timings

NAME = "feedback"
CHECK_LIMIT = 25.0  # seconds for a warm make check on the solutions (issue 13)
RERUN_LIMIT = 2.5  # seconds for one printed rerun command


def measure(options: argparse.Namespace) -> dict[str, Any]:
    runs = [timings(options.impl) for _ in range(options.repeats)]
    return {
        "make_check_s": spread([run["check_seconds"] for run in runs]),
        "rerun_s": spread([run["rerun_seconds"] for run in runs]),
        "model_built": importlib.util.find_spec("llama_cpp") is not None,
    }


def lines(result: dict[str, Any]) -> list[str]:
    note = "" if result["model_built"] else " (no embedded model: exercises 5 and 6 not timed)"
    check, rerun = result["make_check_s"]["median"], result["rerun_s"]["median"]
    return [
        f"feedback: make check on the solutions {check:.1f} s warm, one rerun {rerun:.2f} s{note}"
    ]


def targets(result: dict[str, Any]) -> list[Target]:
    check, rerun = result["make_check_s"]["median"], result["rerun_s"]["median"]
    return [
        Target(f"warm make check <= {CHECK_LIMIT:g} s", check <= CHECK_LIMIT, f"{check:.1f} s"),
        Target(f"one rerun <= {RERUN_LIMIT:g} s", rerun <= RERUN_LIMIT, f"{rerun:.2f} s"),
    ]
