"""The summaries every section gives: a median with its spread, and nearest-rank percentiles."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max and count of one figure over repeats."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank: the smallest sample with at least ``q`` percent of the samples at or below."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


@dataclass(frozen=True)
class Target:
    """One target of the issue: held or missed, with the figure and, when missed, why."""

    name: str
    held: bool
    figure: str
    reason: str = ""

    def line(self) -> str:
        mark = "held  " if self.held else "MISSED"
        why = f" -- {self.reason}" if self.reason and not self.held else ""
        return f"  [{mark}] {self.name}: {self.figure}{why}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
