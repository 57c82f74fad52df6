"""How long a class takes to grade: ``COUNT`` copies of the reference, ``JOBS`` at a time.

    python -m lucyshop.lab.grade.speed [--count 8] [--jobs 2] [--no-checkpoint] [--exercises]

The target (issue 18) is 8 submissions in at most 6 minutes on 2 cores. Copies of the
reference are the slow case: every test and every checkpoint case runs to the end. With
``--exercises`` each copy hands in the worked exercise answers too, so the measured exercises
run real model turns. ``measure`` returns the figures for ``make bench``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.grade import rubric as rubrics
from lucyshop.lab.grade.classroom import grade_class
from lucyshop.lab.grade.submissions import CHAPTER, EXERCISES, find
from lucyshop.lab.loader import SOLUTIONS

TARGET_SECONDS = 360.0


def measure(
    count: int = 8, jobs: int = 2, *, checkpoint: bool = True, exercises: bool = False
) -> dict:
    """Grade ``count`` copies of the reference and return the wall-clock figures."""
    with tempfile.TemporaryDirectory(prefix="lucyshop-grade-speed-") as scratch:
        hand_ins = Path(scratch) / "class"
        for number in range(count):
            student = hand_ins / f"student-{number:02d}"
            student.mkdir(parents=True)
            (student / CHAPTER).write_bytes((SOLUTIONS / CHAPTER).read_bytes())
            if exercises:
                (student / EXERCISES).write_bytes((SOLUTIONS / EXERCISES).read_bytes())
        started = time.monotonic()
        graded = grade_class(
            find(hand_ins),
            Path(scratch) / "grades",
            rubrics.load(),
            jobs=jobs,
            checkpoint=checkpoint,
            progress=False,
        )
        seconds = time.monotonic() - started
    return {
        "submissions": count,
        "jobs": jobs,
        "checkpoint": checkpoint,
        "exercises": exercises,
        "seconds": round(seconds, 1),
        "seconds_per_submission": round(seconds / max(count, 1), 1),
        "target_seconds_for_8": TARGET_SECONDS,
        "all_checked": all(g.verdict.status == "CHECKED" for g in graded),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucyshop.lab.grade.speed")
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
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
