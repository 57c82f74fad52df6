"""The instructor's rubric (``grading/rubric.toml``) and the score it gives one verdict.

The weighting is documented in the rubric file itself; this module only applies it. Points are
counted in whole hundredths: a part's points are split among its rows (and the checkpoint's
among its cases) by the largest remainder, so the lines Gradescope shows add up to the total
exactly (a rounding of each share alone gave 100.01), and a score is the sum of its lines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from lucyshop.lab.check.guard import Limits
from lucyshop.lab.check.results import Row
from lucyshop.lab.checkpoint.cases import CASES, Case
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import Status, VerdictStatus

DEFAULT = ROOT / "grading" / "rubric.toml"
CHECKPOINT_CASES = len(CASES)  # checkpoints/ch13_worker_recovery.py's
EARNS_NOTHING = (Status.NOT_STARTED, Status.NOT_SUBMITTED, Status.LEFT_OUT)
# Gradescope's test visibilities (its "Autograder Specifications").
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


@dataclass(frozen=True)
class Part:
    points: float
    partial: bool = True
    weights: dict[str, float] = field(default_factory=dict)
    visibility: str = "visible"  # of this part's tests on Gradescope

    def weight(self, label: str) -> float:
        return self.weights.get(label, 1.0)


@dataclass(frozen=True)
class Rubric:
    functions: Part
    exercises: Part
    checkpoint: float
    flag_at: float
    seconds: float  # one whole submission
    limits: Limits = field(default_factory=Limits)  # one test, one checkpoint case, the import
    checkpoint_visibility: str = "after_due_date"

    @property
    def total(self) -> float:
        return self.functions.points + self.exercises.points + self.checkpoint

    @property
    def digest(self) -> str:
        """sha256 of everything that changes a grade: a rerun under another rubric regrades."""
        text = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Line:
    """One graded line (a function or exercise row, a checkpoint case), in hundredths."""

    kind: str  # function, exercise, checkpoint, or "check" for a file that was not checked
    label: str
    earned: int
    available: int
    row: Row | None = None
    case: Case | None = None


@dataclass(frozen=True)
class Score:
    """One student's score: its total in points and every graded line it comes from, worked
    out once (``score``); the feedback and ``results.json`` render these lines. A result read
    back from disk keeps the total alone (no lines): both were written when it was graded."""

    points: float
    lines: tuple[Line, ...] = ()

    def part(self, kind: str) -> tuple[int, int]:
        """Hundredths earned and available on the lines of ``kind``."""
        own = [line for line in self.lines if line.kind == kind]
        return sum(line.earned for line in own), sum(line.available for line in own)

    @property
    def available(self) -> float:
        """Points on offer: the rubric's total, as the lines split it."""
        return sum(line.available for line in self.lines) / 100


def load(path: Path = DEFAULT) -> Rubric:
    """Read and check a rubric; ValueError names the first thing wrong with it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"cannot read the rubric {path}: {error}") from None
    checkpoint = data.get("checkpoint", {})
    return Rubric(
        _part(data, "functions", "visible"),
        _part(data, "exercises", "visible"),
        _points(checkpoint.get("points", 0), "checkpoint.points"),
        _number(data.get("similarity", {}).get("flag_at", 0.8), "similarity.flag_at", high=1),
        _number(data.get("limits", {}).get("seconds", 480), "limits.seconds", low=1),
        _limits(data.get("limits", {})),
        _visibility(checkpoint.get("visibility", "after_due_date"), "checkpoint.visibility"),
    )


def _limits(table: dict) -> Limits:
    """``[limits]``'s ``test_seconds``, ``case_seconds`` and ``import_seconds``."""
    keys = {"test": "test_seconds", "case": "case_seconds", "load": "import_seconds"}
    return Limits(
        **{
            name: _number(table.get(key, getattr(Limits, name)), f"limits.{key}", low=1)
            for name, key in keys.items()
        }
    )


def with_seconds(rubric: Rubric, seconds: float) -> Rubric:
    """The same rubric with another per-submission deadline."""
    return dataclasses.replace(rubric, seconds=_number(seconds, "--timeout", low=1))


def _part(data: dict, name: str, visibility: str) -> Part:
    table = data.get(name, {})
    partial = table.get("partial", True)
    if not isinstance(partial, bool):
        raise ValueError(f"rubric {name}.partial must be true or false, not {partial!r}")
    weights = {
        str(label): _number(value, f"{name}.weights.{label}")
        for label, value in table.get("weights", {}).items()
    }
    return Part(
        _points(table.get("points", 0), f"{name}.points"),
        partial,
        weights,
        _visibility(table.get("visibility", visibility), f"{name}.visibility"),
    )


def _number(value: object, name: str, *, low: float = 0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"rubric {name} must be a finite number, not {value!r}")
    if not low <= value <= high:
        raise ValueError(f"rubric {name} must be from {low:g} to {high:g}, not {value!r}")
    return float(value)


def _points(value: object, name: str) -> float:
    """Points in whole hundredths, the unit every score is counted in."""
    points = _number(value, name)
    if abs(points * 100 - round(points * 100)) > 1e-6:
        raise ValueError(f"rubric {name} must be in hundredths of a point, not {value!r}")
    return points


def _visibility(value: object, name: str) -> str:
    if value not in VISIBILITIES:
        raise ValueError(f"rubric {name} must be one of {', '.join(VISIBILITIES)}, not {value!r}")
    return str(value)


def hundredths(points: float) -> int:
    return round(points * 100)


def apportion(exact: Sequence[Fraction], total: int) -> list[int]:
    """Whole hundredths, each as near its ``exact`` value as can be, adding up to ``total``.

    Largest remainder: each is rounded down, and the hundredths left over go to the largest
    remainders, the earlier line first on a tie, so the split is the same every run.
    """
    floors = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (floors[i] - exact[i], i))
    for index in order[: total - sum(floors)]:
        floors[index] += 1
    return floors


def shares(points: float, weights: Sequence[float]) -> list[int]:
    """``points`` split by ``weights`` into hundredths that add up to exactly ``points``."""
    total = hundredths(points)
    exact = [Fraction(w) for w in weights]
    if sum(exact) <= 0:  # every weight 0: the part is shared equally, never lost
        exact = [Fraction(1)] * len(exact)
    weight = sum(exact)
    return apportion([total * w / weight for w in exact], total)


def row_earns(row: Row, available: int, part: Part) -> Fraction:
    """Hundredths one row earns of its ``available``: tests passed over tests run if partial."""
    if row.status in EARNS_NOTHING or row.total <= 0:
        return Fraction(0)
    if row.status == Status.PASSING and row.passed == row.total:
        return Fraction(available)
    if not part.partial:
        return Fraction(0)
    return Fraction(available * min(row.passed, row.total), row.total)


def _earned(exact: Sequence[Fraction]) -> list[int]:
    """The rows' points in hundredths: their total rounded once (half up), then apportioned,
    so sixteen half-passing rows earn exactly half the part, not a cent more per row."""
    return apportion(exact, math.floor(sum(exact, Fraction(0)) + Fraction(1, 2)))


def score(verdict: Verdict, rubric: Rubric) -> Score:
    """The submission's score under ``rubric``: 0 for one that could not be checked."""
    found = _lines(verdict, rubric)
    return Score(sum(line.earned for line in found) / 100, tuple(found))


def _lines(verdict: Verdict, rubric: Rubric) -> list[Line]:
    """Every graded line of ``verdict``; their ``available`` add up to the rubric's total."""
    if verdict.status != VerdictStatus.CHECKED:
        return [Line("check", "the file can be checked", 0, hundredths(rubric.total))]
    found: list[Line] = []
    for kind, part in (("function", rubric.functions), ("exercise", rubric.exercises)):
        rows = [r for r in verdict.rows if r.kind == kind]
        split = shares(part.points, [part.weight(r.label) for r in rows])
        earned = _earned([row_earns(r, each, part) for r, each in zip(rows, split, strict=True)])
        found += [
            Line(kind, row.label, got, each, row=row)
            for row, got, each in zip(rows, earned, split, strict=True)
        ]
    cases: list[Case | None] = sorted(verdict.cases, key=lambda c: c.case)
    count = max(len(cases), CHECKPOINT_CASES)
    unused = iter([n for n in range(count) if n not in {c.case for c in verdict.cases}])
    cases += [None] * (count - len(cases))  # cases that never ran earn nothing, but count
    for case, each in zip(cases, shares(rubric.checkpoint, [1] * count), strict=True):
        number = case.case if case is not None else next(unused)
        earned = each if case is not None and case.passed else 0
        found.append(Line("checkpoint", f"case {number}", earned, each, case=case))
    return found
