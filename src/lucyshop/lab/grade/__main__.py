"""``python -m lucyshop.lab.grade SUBMISSIONS``: grade a class (see ``lucyshop.lab.grade``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.grade import rubric as rubrics
from lucyshop.lab.grade.classroom import grade_class
from lucyshop.lab.grade.submissions import find


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.grade",
        description="Grade every hand-in under SUBMISSIONS into a gradebook.",
    )
    parser.add_argument(
        "submissions", type=Path, help="DIR/<student>/ch13_leases.py or DIR/<student>.py"
    )
    parser.add_argument(
        "--out", type=Path, help="where the gradebook goes (default: SUBMISSIONS-grades beside it)"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="submissions checked at once (default 2)"
    )
    parser.add_argument("--rubric", type=Path, default=rubrics.DEFAULT, help="the weighting (TOML)")
    parser.add_argument("--no-checkpoint", action="store_true", help="learner tables only")
    parser.add_argument(
        "--timeout", type=float, help="seconds per submission (default: the rubric's)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        rubric = rubrics.load(args.rubric)
        if args.timeout is not None:
            rubric = rubrics.with_seconds(rubric, args.timeout)
        submissions = find(args.submissions)
        if args.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, not {args.jobs}")
    except ValueError as error:
        print(f"make grade: {error}", file=sys.stderr)
        return 2
    if not submissions:
        print(f"make grade: no submissions under {args.submissions}", file=sys.stderr)
        return 2
    hand_ins = args.submissions.resolve()
    out = args.out or hand_ins.with_name(f"{hand_ins.name}-grades")
    graded = grade_class(
        submissions,
        out,
        rubric,
        jobs=args.jobs,
        checkpoint=not args.no_checkpoint,
        progress=not args.no_progress,
    )
    width = max(len(g.submission.student) for g in graded) + 2
    for item in graded:
        like = "" if item.similarity is None else f"similarity {item.similarity:.2f}"
        flag = "  FLAGGED: compare with the reference" if item.flagged else ""
        print(
            f"  {item.submission.student:<{width}}{item.verdict.status:<14}"
            f"{item.score:>6g}/{rubric.total:g}  {like}{flag}"
        )
    print(f"gradebook: {out / 'grades.csv'}  (feedback/ and gradescope/ beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
