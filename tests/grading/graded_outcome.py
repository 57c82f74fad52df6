"""Grade a class directory and print everything its grades are made of, as JSON: run as a child
(``python graded_outcome.py CLASS OUT [--nice N]``) so the whole grading, every check it starts
included, can run at a lower priority than the process that asked for it."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from lucyshop.lab.grade import rubric, submissions
from lucyshop.lab.grade.classroom import grade_class


def outcome(graded) -> dict:
    """Everything a grade is made of, per student."""
    return {
        item.submission.student: {
            "status": item.verdict.status,
            "score": item.score.points,
            "rows": [[r.label, r.status, r.passed, r.total] for r in item.verdict.rows],
            "checkpoint": item.verdict.checkpoint,
            "cases": [[c.case, c.passed] for c in item.verdict.cases],
        }
        for item in graded
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("hand_ins", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--nice", type=int, default=0, help="added to this process's niceness")
    args = parser.parse_args()
    os.nice(args.nice)  # before any check starts: each inherits it
    found = submissions.find(args.hand_ins)
    graded = grade_class(found, args.out, rubric.load(), jobs=2, progress=False)
    print(json.dumps({"niceness": os.nice(0), "outcome": outcome(graded)}))


if __name__ == "__main__":
    main()
