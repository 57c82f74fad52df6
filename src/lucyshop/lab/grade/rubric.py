"""The instructor's rubric (``grading/rubric.toml``) and the score it gives one verdict.

The weighting is documented in the rubric file itself; this module only applies it.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from lucyshop.lab.grade.verdict import Row, Verdict
from lucyshop.lab.loader import ROOT
from lucyshop.lab.report import UNMEASURED, Limits

DEFAULT = ROOT / "grading" / "rubric.toml"
CHECKPOINT_CASES = 7  # cases 0-6 of checkpoints/ch13_worker_recovery.py


@dataclass(frozen=True)
class Part:
    points: float
    partial: bool = True
    weights: dict[str, float] = field(default_factory=dict)

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

    @property
    def total(self) -> float:
        return self.functions.points + self.exercises.points + self.checkpoint


def load(path: Path = DEFAULT) -> Rubric:
    """Read and check a rubric; ValueError names the first thing wrong with it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"cannot read the rubric {path}: {error}") from None
    return Rubric(
        _part(data, "functions"),
        _part(data, "exercises"),
        _number(data.get("checkpoint", {}).get("points", 0), "checkpoint.points"),
        _number(data.get("similarity", {}).get("flag_at", 0.8), "similarity.flag_at", high=1),
        _number(data.get("limits", {}).get("seconds", 900), "limits.seconds", low=1),
        _limits(data.get("limits", {})),
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


def _part(data: dict, name: str) -> Part:
    table = data.get(name, {})
    partial = table.get("partial", True)
    if not isinstance(partial, bool):
        raise ValueError(f"rubric {name}.partial must be true or false, not {partial!r}")
    weights = {
        str(label): _number(value, f"{name}.weights.{label}")
        for label, value in table.get("weights", {}).items()
    }
    return Part(_number(table.get("points", 0), f"{name}.points"), partial, weights)


def _number(value: object, name: str, *, low: float = 0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"rubric {name} must be a finite number, not {value!r}")
    if not low <= value <= high:
        raise ValueError(f"rubric {name} must be from {low:g} to {high:g}, not {value!r}")
    return float(value)


def row_points(row: Row, part: Part, rows: list[Row]) -> tuple[float, float]:
    """(earned, available) points for one row, its share of ``part`` among ``rows``."""
    total_weight = sum(part.weight(r.label) for r in rows) or 1.0
    available = part.points * part.weight(row.label) / total_weight
    if row.status in ("NOT STARTED", *UNMEASURED) or row.total == 0:
        return 0.0, available
    if row.status == "PASSING" and row.passed == row.total:
        return available, available
    return (available * row.passed / row.total if part.partial else 0.0), available


def per_case(verdict: Verdict, rubric: Rubric) -> float:
    """Points for each passed checkpoint case (the cases share the checkpoint's points)."""
    return rubric.checkpoint / max(len(verdict.cases), CHECKPOINT_CASES)


def score(verdict: Verdict, rubric: Rubric) -> float:
    """The submission's total, rounded to hundredths: 0 for one that could not be checked."""
    if verdict.status != "CHECKED":
        return 0.0
    earned = 0.0
    for kind, part in (("function", rubric.functions), ("exercise", rubric.exercises)):
        rows = [r for r in verdict.rows if r.kind == kind]
        earned += sum(row_points(r, part, rows)[0] for r in rows)
    earned += per_case(verdict, rubric) * sum(c.passed for c in verdict.cases)
    return round(earned, 2)
