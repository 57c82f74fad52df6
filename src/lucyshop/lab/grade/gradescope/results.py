"""A verdict as Gradescope's autograder ``results.json``.

Gradescope's specification (gradescope-autograders.readthedocs.io, "Autograder
Specifications"): a top-level ``score`` (required when the tests carry none), optional
``execution_time``, ``output``, ``visibility``, ``stdout_visibility`` and ``tests``; each test
has ``name``, ``score``, ``max_score``, ``output`` and optionally ``status`` (passed/failed),
``number``, ``tags`` and ``visibility``. ``grading/results.schema.json`` is that
specification as a JSON Schema, and the tests validate every file written here against it.
"""

from __future__ import annotations

from lucyshop.lab.grade.feedback import check_text, exercises_missing, span, why
from lucyshop.lab.grade.rubric import Line, Rubric, Score
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import Status, VerdictStatus

SCHEMA = ROOT / "grading" / "results.schema.json"


def document(
    verdict: Verdict,
    rubric: Rubric,
    *,
    scored: Score,
    similarity: float | None = None,
) -> dict:
    """The ``results.json`` document for one submission: the lines of its score as
    Gradescope's tests. ``scored`` is the rubric's score worked out once, when it was graded,
    so that the feedback, the gradebook and this document show the same lines."""
    tests = _tests(verdict, scored, rubric)
    written: dict = {
        "score": sum(_cents(t["score"]) for t in tests) / 100,
        "execution_time": round(verdict.seconds),
        "output": _summary(verdict, scored),
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    if similarity is not None:  # for the instructor's eyes only: extra_data is never shown
        written["extra_data"] = {"similarity_to_reference": similarity}
    return written


def _cents(points: float) -> int:
    return round(points * 100)


def _summary(verdict: Verdict, scored: Score) -> str:
    if verdict.status != VerdictStatus.CHECKED:
        return f"{verdict.status}: {verdict.error}\n\n{verdict.feedback}".rstrip()
    return check_text(verdict, scored)


def _tests(verdict: Verdict, scored: Score, rubric: Rubric) -> list[dict]:
    """One test per row and per checkpoint case; their ``max_score`` add up to the total."""
    found = list(scored.lines)
    visibility = {
        "check": "visible",
        "function": rubric.functions.visibility,
        "exercise": rubric.exercises.visibility,
        "checkpoint": rubric.checkpoint_visibility,
    }
    missing = [
        line for line in found if line.row is not None and line.row.status == Status.NOT_SUBMITTED
    ]
    if missing:  # one line, 0 points, not rows blaming a file that was not handed in
        found = [line for line in found if line not in missing]
        name = "exercises" if exercises_missing(verdict) else span([m.label for m in missing])
        available = sum(line.available for line in missing)
        found.append(Line("exercise", f"{name}: {Status.NOT_SUBMITTED}", 0, available))
    return [_test(line, verdict, visibility[line.kind]) for line in found]


def _test(line: Line, verdict: Verdict, visibility: str) -> dict:
    test = {
        "name": _name(line),
        "score": line.earned / 100,
        "max_score": line.available / 100,
        "status": "passed" if _passed(line) else "failed",
        "output": _output(line, verdict),
        "tags": [line.kind],
        "visibility": visibility,
    }
    return test


def _passed(line: Line) -> bool:
    """A row passes by its own status, so that one worth no points (it arrives written) is not
    shown failed; a checkpoint case or line by its points."""
    if line.row is not None:
        return line.row.status == Status.PASSING
    return bool(line.available) and line.earned == line.available


def _name(line: Line) -> str:
    if line.row is not None:
        return f"{line.row.label} ({line.row.passed}/{line.row.total} tests)"
    if line.case is not None:
        return f"checkpoint case {line.case.case}: {line.case.name}"
    if line.kind == "checkpoint":
        return f"checkpoint {line.label}: did not run"
    return line.label


def _output(line: Line, verdict: Verdict) -> str:
    if line.kind == "check":
        return f"{verdict.status}: {verdict.error}"
    if line.row is not None:
        row = line.row
        return f"{row.status}: {row.message}" if row.message else row.status
    if line.case is not None:
        return line.case.message
    if line.kind == "checkpoint":
        return f"the checkpoint was {verdict.checkpoint}: this case earned nothing"
    return f"{why(verdict)}: 0 of {line.available / 100:g} points"
