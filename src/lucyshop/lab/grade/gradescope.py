"""A verdict as Gradescope's autograder ``results.json``.

Gradescope's specification (gradescope-autograders.readthedocs.io, "Autograder
Specifications"): a top-level ``score`` (required when the tests carry none), optional
``execution_time``, ``output``, ``visibility``, ``stdout_visibility`` and ``tests``; each test
has ``name``, ``score``, ``max_score``, ``output`` and optionally ``status`` (passed/failed),
``number``, ``tags`` and ``visibility``. ``grading/results.schema.json`` is that
specification as a JSON Schema, and the tests validate every file written here against it.
"""

from __future__ import annotations

from lucyshop.lab.grade.rubric import Rubric, per_case, row_points, score
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import ROOT

SCHEMA = ROOT / "grading" / "results.schema.json"


def results(verdict: Verdict, rubric: Rubric, *, similarity: float | None = None) -> dict:
    """The ``results.json`` document for one submission."""
    document: dict = {
        "score": score(verdict, rubric),
        "execution_time": round(verdict.seconds),
        "output": _summary(verdict),
        "stdout_visibility": "hidden",
        "tests": _tests(verdict, rubric),
    }
    if similarity is not None:  # for the instructor's eyes only: extra_data is never shown
        document["extra_data"] = {"similarity_to_reference": similarity}
    return document


def _summary(verdict: Verdict) -> str:
    if verdict.status != "CHECKED":
        return f"{verdict.status}: {verdict.error}\n\n{verdict.feedback}".rstrip()
    return verdict.feedback


def _tests(verdict: Verdict, rubric: Rubric) -> list[dict]:
    if verdict.status != "CHECKED":
        return [
            {
                "name": "the file can be checked",
                "score": 0.0,
                "max_score": rubric.total,
                "status": "failed",
                "output": f"{verdict.status}: {verdict.error}",
            }
        ]
    tests = []
    for kind, part in (("function", rubric.functions), ("exercise", rubric.exercises)):
        rows = [r for r in verdict.rows if r.kind == kind]
        for row in rows:
            earned, available = row_points(row, part, rows)
            tests.append(
                {
                    "name": f"{row.label} ({row.passed}/{row.total} tests)",
                    "score": round(earned, 2),
                    "max_score": round(available, 2),
                    "status": "passed" if row.status == "PASSING" else "failed",
                    "output": f"{row.status}: {row.message}" if row.message else row.status,
                    "tags": [kind],
                }
            )
    each = per_case(verdict, rubric)
    for case in verdict.cases:
        tests.append(
            {
                "name": f"checkpoint case {case.case}: {case.name}",
                "score": round(each if case.passed else 0.0, 2),
                "max_score": round(each, 2),
                "status": "passed" if case.passed else "failed",
                "output": case.message,
                "tags": ["checkpoint"],
            }
        )
    return tests
