"""Section ``grading``: eight copies of the reference graded as ``make grade`` grades them."""

from __future__ import annotations

import argparse
from typing import Any

from lucyshop.lab.bench.stats import Target
from lucyshop.lab.grade.speed import measure as grade_class

NAME = "grading"
LIMIT = 360.0  # seconds for 8 submissions on 2 cores, two at a time (issue 18)


def measure(options: argparse.Namespace) -> dict[str, Any]:
    return grade_class(count=8, jobs=2)


def lines(result: dict[str, Any]) -> list[str]:
    return [f"grading: 8 submissions, 2 at a time, in {result['seconds']:.0f} s"]


def targets(result: dict[str, Any]) -> list[Target]:
    seconds = result["seconds"]
    return [Target(f"8 submissions <= {LIMIT:g} s", seconds <= LIMIT, f"{seconds:.0f} s")]
