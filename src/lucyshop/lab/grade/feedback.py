"""What a student reads: the check's feedback, in their own file names, with honest labels.

The check ran on a staged copy under the grader's scratch directory, so its feedback names
paths that mean nothing to the student (``/tmp/lucyshop-grade-.../ch13_leases.py``) and some
that are the instructor's own (the kit's checkout). ``scrub`` puts back the names a student
has in their kit: ``learner/ch13_leases.py`` and ``learner/exercises.py``, so every rerun line
can be pasted into their own terminal. A hand-in without ``exercises.py`` had the stubs
staged beside it (so the check ran none of those tests); its six exercise rows become one
NOT SUBMITTED line worth 0, instead of six rows that blame files the student never sent.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lucyshop.lab.grade.rubric import CHECKPOINT_CASES, NOT_SUBMITTED, Rubric, lines
from lucyshop.lab.grade.submissions import CHAPTER, EXERCISES
from lucyshop.lab.grade.verdict import Row, Verdict
from lucyshop.lab.loader import ROOT

STUDENT_CHAPTER = f"learner/{CHAPTER}"
STUDENT_EXERCISES = f"learner/{EXERCISES}"
_EXERCISE_LINE = re.compile(r"^  exercise \d+ ")
_SUMMARY_EXERCISES = re.compile(r"(· )exercises: .*$")


def scrub(text: str, staged: Path, work: Path) -> str:
    """``text`` with the staged copies named as the student's files, and no grader paths."""
    replacements = [
        (str(staged / CHAPTER), STUDENT_CHAPTER),
        (str(staged / EXERCISES), STUDENT_EXERCISES),
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


def not_submitted(verdict: Verdict, points: float) -> Verdict:
    """Mark a checked verdict's exercise rows NOT SUBMITTED, and say so once in its feedback."""
    if verdict.status != "CHECKED":
        return verdict
    why = f"no {EXERCISES} was handed in"
    verdict.rows = [
        Row(r.label, r.kind, NOT_SUBMITTED, 0, 0, why) if r.kind == "exercise" else r
        for r in verdict.rows
    ]
    kept: list[str] = []
    for line in verdict.feedback.splitlines():
        if _EXERCISE_LINE.match(line):
            if not any(k.startswith("  exercises ") for k in kept):
                kept.append(
                    f"  exercises 1-6       {NOT_SUBMITTED}   {why}: 0 of {points:g} points"
                )
            continue
        kept.append(_SUMMARY_EXERCISES.sub(rf"\1exercises: {NOT_SUBMITTED}", line))
    verdict.feedback = "\n".join(kept) + "\n"
    return verdict


def checkpoint_label(verdict: Verdict) -> str:
    """The checkpoint as the gradebook shows it: ``3/7 cases`` once some cases earned points.

    The judge's NOT STARTED means "the file was not ready for the checkpoint", which is untrue
    of a file that passed cases and earned their points.
    """
    if verdict.status != "CHECKED":
        return ""
    passed = sum(c.passed for c in verdict.cases)
    if verdict.checkpoint == "PASSED" or passed == 0:
        return verdict.checkpoint
    return f"{passed}/{max(len(verdict.cases), CHECKPOINT_CASES)} cases"


def exercises_missing(verdict: Verdict) -> bool:
    rows = [r for r in verdict.rows if r.kind == "exercise"]
    return bool(rows) and all(r.status == NOT_SUBMITTED for r in rows)


def grade_lines(verdict: Verdict, rubric: Rubric) -> list[str]:
    """The score and each part's points, as the first lines of a student's feedback."""
    found = lines(verdict, rubric)
    total = sum(line.earned for line in found) / 100
    if verdict.status != "CHECKED":
        return [f"grade: {total:g} of {rubric.total:g} ({verdict.status}: {verdict.error})"]
    parts = []
    for kind, name in (("function", "functions"), ("exercise", "exercises"), ("checkpoint", "")):
        own = [line for line in found if line.kind == kind]
        earned = sum(line.earned for line in own) / 100
        available = sum(line.available for line in own) / 100
        label = name or f"checkpoint {checkpoint_label(verdict)}"
        if kind == "exercise" and exercises_missing(verdict):
            label = f"exercises {NOT_SUBMITTED}"
        parts.append(f"{label} {earned:g}/{available:g}")
    return [f"grade: {total:g} of {rubric.total:g} ({', '.join(parts)})"]


def text(verdict: Verdict, rubric: Rubric) -> str:
    """The whole feedback file: the grade, then what ``make check`` showed."""
    head = "\n".join(grade_lines(verdict, rubric))
    if verdict.status == "CHECKED":
        return f"{head}\n\n{verdict.feedback}".rstrip() + "\n"
    return f"{head}\n\n{verdict.status}: {verdict.error}\n\n{verdict.feedback}".rstrip() + "\n"
