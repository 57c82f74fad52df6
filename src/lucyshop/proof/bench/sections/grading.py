"""Section ``grading``: a class of twenty copies of the reference, each with the worked
exercises and the checkpoint, graded as ``make grade`` grades them (``JOBS`` cores + 1): the
wall clock a student, the CPU-seconds one student costs, and what a class of 200 would take."""

from __future__ import annotations

import argparse
from typing import Any

from lucyshop.proof.bench import speed
from lucyshop.proof.bench.speed import CLASS
from lucyshop.proof.bench.stats import Target

NAME = "grading"
COUNT = 20  # the class graded (issue 46: at least twenty)
LIMIT = 3.0  # wall seconds a student on 2 cores (issue 46)
CPU_LIMIT = 20.0  # CPU-seconds one submission costs (issue 29)
CLASS_LIMIT = 3600.0  # seconds for the class of 200 on this machine, every core busy (issue 29)
PROJECTED = f"projected_seconds_for_{CLASS}_cpu_bound"


def measure(options: argparse.Namespace) -> dict[str, Any]:
    return speed.measure(count=COUNT, exercises=True)


def lines(result: dict[str, Any]) -> list[str]:
    line = (
        f"grading: {result['submissions']} submissions with their exercises and checkpoint,"
        f" {result['jobs']} at a time, in {result['seconds']:.0f} s"
        f" ({result['wall_seconds_per_student']:.1f} s a student);"
        f" {result['cpu_seconds_per_student']:.1f} CPU-s a student,"
        f" so {CLASS} students in about {result[PROJECTED] / 60:.0f} min on"
        f" {result['cores']} cores"
    )
    return [line]


def targets(result: dict[str, Any]) -> list[Target]:
    each, cpu, projected = (
        result["seconds"] / result["submissions"],
        result["cpu_seconds_per_student"],
        result[PROJECTED],
    )
    floor = cpu / max(result["cores"], 1)
    return [
        Target(
            f"a class of {COUNT}: <= {LIMIT:g} s of wall a student",
            each <= LIMIT,
            f"{each:.1f} s a student",
            f"at least {floor:.1f} s a student here: {cpu:.1f} CPU-s a student with all"
            f" {result['cores']} cores busy",
        ),
        Target(f"<= {CPU_LIMIT:g} CPU-s a submission", cpu <= CPU_LIMIT, f"{cpu:.1f} CPU-s"),
        Target(
            f"{CLASS} submissions <= {CLASS_LIMIT / 60:g} min",
            projected <= CLASS_LIMIT,
            f"{projected / 60:.0f} min",
        ),
    ]
