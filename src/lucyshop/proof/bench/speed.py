"""How long a class takes to grade: ``COUNT`` copies of the reference, ``JOBS`` at a time.

    python -m lucyshop.proof.bench.speed [--count 20] [--jobs N] [--no-checkpoint] [--exercises]

The target (issue 46, in ``make bench``) is at most 3 s of wall a student on 2 cores. Copies of the
reference are the slow case: every test and every checkpoint case runs to the end. With
``--exercises`` each copy hands in the worked exercise answers too, so the measured exercises
run. ``measure`` returns the figures for ``make bench``: besides the wall clock, the
CPU-seconds one student costs and what 200 students would take. Those CPU-seconds are the
machine's (``lucyshop.proof.machine``), not the grader's ``RUSAGE_CHILDREN``, which misses
every process not waited for all the way up to the grader. Both are recorded. Wall time depends
on the load and the jobs; CPU-seconds per student much less so, and ``cores x hours`` bounds
what a class can cost on any machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.grade import rubric
from lucyshop.lab.grade.classroom import Options, default_jobs, grade_class
from lucyshop.lab.grade.submissions import CHAPTER, EXERCISES, find
from lucyshop.lab.loader import SOLUTIONS
from lucyshop.lab.statuses import VerdictStatus
from lucyshop.proof.machine import cores, machine_cpu

CLASS = 200  # the course size the projection is for


def children_cpu() -> float:
    """CPU-seconds (user + system) of every child this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def projection(count: int, seconds: float, cpu: float) -> dict:
    """Per-student costs and the wall time ``CLASS`` students would take."""
    per_student = cpu / max(count, 1)
    return {
        "cpu_seconds_per_student": round(per_student, 1),
        "wall_seconds_per_student": round(seconds / max(count, 1), 1),
        # The same jobs on this machine, at the rate this run graded.
        f"projected_seconds_for_{CLASS}": round(seconds / max(count, 1) * CLASS),
        # Every core busy (cores + 1 jobs): the class's CPU-seconds spread over the cores.
        f"projected_seconds_for_{CLASS}_cpu_bound": round(per_student * CLASS / cores()),
        "cores": cores(),
    }


def measure(
    count: int = 20,
    jobs: int | None = None,
    *,
    checkpoint: bool = True,
    exercises: bool = False,
) -> dict:
    """Grade ``count`` copies of the reference and return the wall-clock and CPU figures."""
    jobs = jobs or default_jobs()
    with tempfile.TemporaryDirectory(prefix="lucyshop-grade-speed-") as scratch:
        hand_ins = Path(scratch) / "class"
        for number in range(count):
            student = hand_ins / f"student-{number:02d}"
            student.mkdir(parents=True)
            (student / CHAPTER).write_bytes((SOLUTIONS / CHAPTER).read_bytes())
            if exercises:
                (student / EXERCISES).write_bytes((SOLUTIONS / EXERCISES).read_bytes())
        cpu, waited, started = machine_cpu(), children_cpu(), time.monotonic()
        graded = grade_class(
            find(hand_ins),
            Path(scratch) / "grades",
            rubric.load(),
            checkpoint=checkpoint,
            options=Options(jobs=jobs, progress=False),
            say=lambda _line: None,
        )
        seconds, cpu = time.monotonic() - started, machine_cpu() - cpu
        waited = children_cpu() - waited
    return {
        "submissions": count,
        "jobs": jobs,
        "checkpoint": checkpoint,
        "exercises": exercises,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),  # the machine's, all of it
        "waited_children_cpu_seconds": round(waited, 1),  # RUSAGE_CHILDREN: a lower bound
        **projection(count, seconds, cpu),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "all_checked": all(g.verdict.status == VerdictStatus.CHECKED for g in graded),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucyshop.proof.bench.speed")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="default: cores + 1")
    parser.add_argument("--no-checkpoint", action="store_true")
    parser.add_argument("--exercises", action="store_true", help="hand in exercises.py too")
    args = parser.parse_args(argv)
    figures = measure(
        args.count, args.jobs, checkpoint=not args.no_checkpoint, exercises=args.exercises
    )
    print(json.dumps(figures, indent=2))
    return 0 if figures["all_checked"] else 1


if __name__ == "__main__":
    sys.exit(main())
