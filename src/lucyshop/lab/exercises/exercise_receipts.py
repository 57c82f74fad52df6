"""Receipts of the measured exercises (13c, exercises 5 and 6): figures derived, and verified.

A receipt is ``{"schema", "exercise", "provenance", "settings", "figures", "observations"}``.
The figures are derived from the raw observations by one function per exercise
(``renewal.figures``, ``records.figures``), with the chapter-13 functions of whichever
implementation is passed in; ``receipt_problems`` derives them again from the stored
observations and lists every figure that differs, every one missing or extra, every
provenance field absent, and every condition of a sound run that does not hold.
An empty list means the receipt stands.

What the observations of each exercise must hold, and the arithmetic on them, is the
exercise's own module: ``renewal`` (exercise 5) and ``records`` (exercise 6). This one closes a
receipt, verifies one against them, and is the command line.

The receipt's shape is ``schemas/exercise5.json`` or ``schemas/exercise6.json``.

    python -m lucyshop.lab.exercises.exercise_receipts FILE [--impl learner|solutions|PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop.lab.evidence import receipts
from lucyshop.lab.exercises import records, renewal
from lucyshop.lab.loader import add_impl_option, block_for, load_impl
from lucyshop.lab.statuses import Mark, result_line

SCHEMA = 2
FIGURES: dict[int, Callable[..., dict[str, Any]]] = {5: renewal.figures, 6: records.figures}
CONDITIONS = {5: renewal.conditions, 6: records.conditions}


def close(
    exercise: int,
    record: dict[str, Any],
    settings: dict[str, Any],
    observations: dict[str, Any],
    leases: ModuleType,
) -> dict[str, Any]:
    """The finished receipt: provenance completed at the end of the run, figures derived."""
    return {
        "schema": SCHEMA,
        "exercise": exercise,
        "provenance": receipts.finish(record, exercise=exercise),
        "settings": settings,
        "figures": FIGURES[exercise](observations, settings, leases),
        "observations": observations,
    }


# ------------------------------------------------------------------ verifying a receipt


def receipt_problems(
    path: str | os.PathLike | Mapping[str, Any], leases: ModuleType | None = None
) -> list[str]:
    """Every way the receipt at ``path`` (or the receipt itself, already read) fails to stand,
    one line each; ``[]`` when it stands.

    Its figures are recomputed from its observations with ``leases`` (default: the
    implementation ``$LEASES_IMPL`` names) and compared, and the conditions of a sound run
    tested. Its shape is ``shape_problems``'s (kept apart: importing jsonschema costs seconds,
    and ``make check`` runs this for every quick receipt).
    """
    receipt_or_path = path
    path = "the receipt" if isinstance(path, Mapping) else Path(path)
    try:
        receipt = receipts.read_receipt(receipt_or_path)
        exercise = receipt["exercise"]
        if exercise not in FIGURES:
            return [f"{path}: exercise {exercise!r} has no receipt to verify (5 or 6)"]
        if receipt.get("schema") != SCHEMA:
            again = f"python solutions/exercises.py {exercise} --out {path}"
            return [f"{path} is a schema {receipt.get('schema')!r} receipt, not {SCHEMA}: {again}"]
        leases = leases if leases is not None else load_impl()
        recomputed = FIGURES[exercise](receipt["observations"], receipt["settings"], leases)
        compared = receipts.compare(receipt["figures"], recomputed)
    except (OSError, ValueError, KeyError, TypeError, IndexError, ZeroDivisionError) as error:
        return [f"{path} is not a receipt this command can read: {type(error).__name__}: {error}"]
    problems = [f"figures.{name}: {why}" for name, why in compared if why]
    try:
        problems += [
            f"condition failed: {what}"
            for what, ok in CONDITIONS[exercise](receipt, receipts.flat(recomputed))
            if not ok
        ]
    except (KeyError, TypeError, IndexError, ValueError) as error:
        problems.append(
            f"the observations lack what a condition reads: {type(error).__name__}: {error}"
        )
    return problems


def verify(path: Path, leases: ModuleType) -> int:
    """Print a ``FAILING`` line per problem (figures, conditions, shape) and the outcome; 0 when
    the receipt at ``path`` stands, 1 when it does not."""
    problems = receipt_problems(path, leases) + shape_problems(path)
    outcome = f"receipt verification {'FAILED' if problems else 'passed'}: {path}"
    print("\n".join([*(result_line(Mark.FAIL, problem) for problem in problems), outcome]))
    return 1 if problems else 0


def shape_problems(path: str | os.PathLike) -> list[str]:
    """Every way the receipt breaks its schema (``schemas/exercise5.json`` or ``exercise6``)."""
    receipt = receipts.read_receipt(path)
    return [f"shape: {p}" for p in receipts.validate(receipt, f"exercise{receipt['exercise']}")]


def headline(receipt: Mapping[str, Any]) -> list[str]:
    """The receipt's main figures, one line each, for a terminal."""
    exercise = renewal if receipt["exercise"] == 5 else records
    return exercise.headline(receipt["figures"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.exercises.exercise_receipts",
        description="recompute an exercise receipt from its observations",
    )
    parser.add_argument("receipt", type=Path)
    add_impl_option(parser)
    args = parser.parse_args(argv)
    block_for(args.impl)  # verifying may use only the implementation named
    return verify(args.receipt, load_impl(args.impl))


if __name__ == "__main__":
    sys.exit(main())
