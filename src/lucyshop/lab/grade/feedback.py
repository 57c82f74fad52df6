"""What a student reads: the check's feedback, in their own file names, with honest labels.

The check ran on a staged copy under the grader's scratch directory, so its feedback names
paths that mean nothing to the student (``/tmp/lucyshop-grade-.../ch13_leases.py``) and some
that are the instructor's own (the kit's checkout). ``scrub`` puts back the names a student
has in their kit: ``learner/ch13_leases.py`` and ``learner/exercises.py``, so every rerun line
can be pasted into their own terminal. A hand-in without ``exercises.py`` (or without
``ch13_postgres.py``, exercise 7) had the stubs staged beside it (so the check ran none of
those tests); the rows of the missing file become one NOT SUBMITTED line worth 0, instead of
rows that blame files the student never sent. The points shown are the rubric's lines
(``rubric.score``), worked out once per student; this module only renders them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.check import subjects
from lucyshop.lab.check.results import Row, printable
from lucyshop.lab.check.subjects import PG_EXERCISE
from lucyshop.lab.grade.rubric import CHECKPOINT_CASES, Score
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import CHAPTER, EXERCISES, PG_FILE, ROOT
from lucyshop.lab.statuses import CheckpointStatus, Status, VerdictStatus

STUDENT_CHAPTER = f"learner/{CHAPTER}"
STUDENT_EXERCISES = f"learner/{EXERCISES}"
STUDENT_POSTGRES = f"learner/{PG_FILE}"
# The exercise rows each file the student may leave out holds.
ROWS_OF = {
    EXERCISES: tuple(row.label for row in subjects.EXERCISES if row.label != PG_EXERCISE),
    PG_FILE: (PG_EXERCISE,),
}
_EXERCISE_LINE = re.compile(r"^  (exercise \d+) ")
_SUMMARY_EXERCISES = re.compile(r"(· )exercises: .*$")


def scrub(text: str, staged: Path, work: Path) -> str:
    """``text`` with the staged copies named as the student's files, and no grader paths."""
    replacements = [
        (str(staged / CHAPTER), STUDENT_CHAPTER),
        (str(staged / EXERCISES), STUDENT_EXERCISES),
        (str(staged / PG_FILE), STUDENT_POSTGRES),
        (str(staged), "learner"),
        (str(work), "$TMPDIR"),
        (f"{ROOT}/", ""),
        (sys.executable, "python"),
    ]
    for old, new in replacements:
        text = text.replace(old, new)
    return text


def scrubbed(verdict: Verdict, staged: Path, work: Path) -> Verdict:
    """``verdict`` with every message in the student's own file names (changed in place)."""
    verdict.feedback = scrub(verdict.feedback, staged, work)
    verdict.error = scrub(verdict.error, staged, work)
    for row in verdict.rows:
        row.message = scrub(row.message, staged, work)
    for case in verdict.cases:
        case.message = scrub(case.message, staged, work)
    return verdict


def not_submitted(verdict: Verdict, missing: Sequence[str]) -> Verdict:
    """Mark the exercise rows of each file in ``missing`` (``exercises.py``,
    ``ch13_postgres.py``) NOT SUBMITTED in a checked verdict (changed in place). They earn
    nothing, and ``check_text`` shows them as one line."""
    file_of = {label: file for file in missing for label in ROWS_OF[file]}
    if verdict.status != VerdictStatus.CHECKED or not file_of:
        return verdict
    verdict.rows = [
        Row(r.label, r.kind, Status.NOT_SUBMITTED, 0, 0, f"no {file_of[r.label]} was handed in")
        if r.label in file_of
        else r
        for r in verdict.rows
    ]
    return verdict


def check_text(verdict: Verdict, score: Score) -> str:
    """What ``make check`` showed, with the rows of files not handed in as one NOT SUBMITTED
    line, with the points they were worth (from ``score``'s lines)."""
    missing = [
        line
        for line in score.lines
        if line.row is not None and line.row.status == Status.NOT_SUBMITTED
    ]
    if not missing:
        return verdict.feedback
    labels = [line.label for line in missing]
    points = sum(line.available for line in missing) / 100
    line = f"  {span(labels):<20}{Status.NOT_SUBMITTED}   {why(verdict)}: 0 of {points:g} points"
    kept: list[str] = []
    for text in verdict.feedback.splitlines():
        row = _EXERCISE_LINE.match(text)
        if row and row.group(1) in labels:
            if line not in kept:
                kept.append(line)
            continue
        if exercises_missing(verdict):
            text = _SUMMARY_EXERCISES.sub(rf"\1exercises: {Status.NOT_SUBMITTED}", text)
        elif _SUMMARY_EXERCISES.search(text):
            text += f" ({span(labels)} {Status.NOT_SUBMITTED})"
        kept.append(text)
    return "\n".join(kept) + "\n"


def span(labels: Sequence[str]) -> str:
    """``exercise 7``, or ``exercises 1-6`` for several rows in a row."""
    if len(labels) == 1:
        return labels[0]
    numbers = [label.rpartition(" ")[2] for label in labels]
    return f"exercises {numbers[0]}-{numbers[-1]}"


def why(verdict: Verdict) -> str:
    """Which files were not handed in: ``no exercises.py was handed in``, or both."""
    files = [
        r.message.removeprefix("no ").removesuffix(" was handed in")
        for r in verdict.rows
        if r.kind == "exercise" and r.status == Status.NOT_SUBMITTED
    ]
    return f"no {' or '.join(dict.fromkeys(files))} was handed in"


def checkpoint_label(verdict: Verdict) -> str:
    """The checkpoint as the gradebook shows it: ``3/7 cases`` once some cases earned points.

    The checkpoint's NOT STARTED means "the file was not ready for the checkpoint", which is
    untrue of a file that passed cases and earned their points.
    """
    if verdict.status != VerdictStatus.CHECKED:
        return ""
    passed = sum(c.passed for c in verdict.cases)
    if verdict.checkpoint == CheckpointStatus.PASSING or passed == 0:
        return verdict.checkpoint
    return f"{passed}/{max(len(verdict.cases), CHECKPOINT_CASES)} cases"


def exercises_missing(verdict: Verdict) -> bool:
    rows = [r for r in verdict.rows if r.kind == "exercise"]
    return bool(rows) and all(r.status == Status.NOT_SUBMITTED for r in rows)


def grade_lines(verdict: Verdict, score: Score) -> list[str]:
    """The score and each part's points, as the first lines of a student's feedback."""
    total, whole = score.points, score.available
    if verdict.status != VerdictStatus.CHECKED:
        return [f"grade: {total:g} of {whole:g} ({verdict.status}: {verdict.error})"]
    parts = []
    for kind, name in (("function", "functions"), ("exercise", "exercises"), ("checkpoint", "")):
        earned, available = score.part(kind)
        label = name or f"checkpoint {checkpoint_label(verdict)}"
        if kind == "exercise" and exercises_missing(verdict):
            label = f"exercises {Status.NOT_SUBMITTED}"
        parts.append(f"{label} {earned / 100:g}/{available / 100:g}")
    return [f"grade: {total:g} of {whole:g} ({', '.join(parts)})"]


def text(verdict: Verdict, score: Score) -> str:
    """The whole feedback file: the grade, then what ``make check`` showed (control characters
    escaped: a hand-in's name or message is shown, never sent to a terminal)."""
    head = "\n".join(grade_lines(verdict, score))
    if verdict.status == VerdictStatus.CHECKED:
        return printable(f"{head}\n\n{check_text(verdict, score)}".rstrip() + "\n")
    said = f"{head}\n\n{verdict.status}: {verdict.error}\n\n{verdict.feedback}"
    return printable(said.rstrip() + "\n")
