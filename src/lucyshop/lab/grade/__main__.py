"""``python -m lucyshop.lab.grade SUBMISSIONS``: grade a class (see ``lucyshop.lab.grade``).

Ctrl-C (or SIGTERM) ends the running checks, keeps every student that finished and prints
one line, exit 130; a rerun goes on from there.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from lucyshop.lab.check.results import printable
from lucyshop.lab.grade import gradebook, rubric
from lucyshop.lab.grade.classroom import Graded, Interrupted, Options, default_jobs, grade_class
from lucyshop.lab.grade.gradebook import flag_reason
from lucyshop.lab.grade.submissions import find
from lucyshop.lab.sandbox import describe, isolation

INTERRUPTED = 130


def parser() -> argparse.ArgumentParser:
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
        "--jobs",
        type=int,
        default=default_jobs(),
        help=f"submissions checked at once (default: cores + 1, here {default_jobs()})",
    )
    parser.add_argument("--rubric", type=Path, default=rubric.DEFAULT, help="the weighting (TOML)")
    parser.add_argument("--no-checkpoint", action="store_true", help="learner tables only")
    parser.add_argument(
        "--timeout", type=float, help="seconds per submission (default: the rubric's)"
    )
    parser.add_argument(
        "--force", action="store_true", help="regrade hand-ins whose results are already kept"
    )
    parser.add_argument(
        "--archive", type=Path, help="earlier hand-ins (any layout) to compare this class with"
    )
    parser.add_argument(
        "--roster", type=Path, help="CSV: folder,id,email,name,... -> IDs in grades.csv, canvas.csv"
    )
    parser.add_argument(
        "--assignment",
        default=gradebook.ASSIGNMENT,
        help="canvas.csv's grade column (Canvas's own export names it 'Name (id)')",
    )
    parser.add_argument("--bom", action="store_true", help="CSV files in UTF-8 with a BOM (Excel)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--unisolated",
        action="store_true",
        help="grade even where nothing isolates the students' code from each other (unsafe)",
    )
    return parser


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: checks ended, results kept


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        weighting = rubric.load(args.rubric)
        if args.timeout is not None:
            weighting = rubric.with_seconds(weighting, args.timeout)
        submissions = find(args.submissions)
        if args.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, not {args.jobs}")
        if args.roster is not None:
            gradebook.load_roster(args.roster)  # refused now, not after an hour of grading
        if args.archive is not None and not args.archive.is_dir():
            raise ValueError(f"no archive directory at {args.archive}")
    except ValueError as error:
        print(f"make grade: {error}", file=sys.stderr)
        return 2
    if not submissions:
        print(f"make grade: no submissions under {args.submissions}", file=sys.stderr)
        return 2
    for refused in (s for s in submissions if s.refused):  # one line each; graded as NO FILE
        print(f"make grade: {refused.shown}: {printable(refused.problem)}", file=sys.stderr)
    if isolation() == "none" and not args.unisolated:
        print(
            f"make grade: refused: {describe('none')}. Each hand-in could read, change or stop"
            " the others: install bubblewrap, or grade as root, or pass --unisolated",
            file=sys.stderr,
        )
        return 2
    hand_ins = args.submissions.resolve()
    out = args.out or hand_ins.with_name(f"{hand_ins.name}-grades")
    options = Options(
        jobs=args.jobs,
        force=args.force,
        archive=args.archive,
        roster=args.roster,
        bom=args.bom,
        assignment=args.assignment,
        progress=not args.no_progress,
    )
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        graded = grade_class(
            submissions, out, weighting, checkpoint=not args.no_checkpoint, options=options
        )
    except Interrupted as stopped:
        print(stopped, file=sys.stderr, flush=True)
        return INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
    _print_table(graded, weighting, out)
    return 0


def _print_table(graded: list[Graded], weighting: rubric.Rubric, out: Path) -> None:
    width = max(len(g.submission.shown) for g in graded) + 2
    for item in graded:
        like = "" if item.similarity is None else f"similarity {item.similarity:.2f}"
        flag = f"  FLAGGED: {flag_reason(item)}" if item.flagged else ""
        print(
            f"  {item.submission.shown:<{width}}{item.verdict.status:<14}"
            f"{item.score.points:>6g}/{weighting.total:g}  {like}{flag}"
        )
    print(
        f"gradebook: {out / 'grades.csv'}  (feedback/, gradescope/ and similarity.html beside it)"
    )


if __name__ == "__main__":
    sys.exit(main())
