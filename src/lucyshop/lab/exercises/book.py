"""The command line of an exercises file (``learner/exercises.py`` or ``solutions/exercises.py``).

    .venv/bin/python learner/exercises.py 1|2|3|4 [--dir DIR]        # one answer, what it returned
    .venv/bin/python learner/exercises.py 5|6 [--quick] [--out FILE]  # a measured answer, a receipt
    .venv/bin/python learner/exercises.py 5|6 --quick --backend scripted  # make check's, by hand
    .venv/bin/python learner/exercises.py verify FILE                 # recompute a receipt

Both files end with ``sys.exit(main(__file__))``; this module finds their answers by name.
A measured answer's receipt goes to ``runs/`` beside the exercises file
(``learner/runs/ch13-exercise5-renewal-receipt.json``), and the run prints where: a learner's
run never writes the kit's ``evidence/``, which ``make check`` compares against. Only the
reference (``solutions/exercises.py``) writes the kit's receipts there. ``make check`` makes
the same quick run itself (its own processes, with the answers' functions in a sandbox) and
grades that: a receipt made here is for reading, and earns nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from lucyshop.lab.exercises import exercise_receipts
from lucyshop.lab.experiment.renewer import load_answers
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import EXERCISES, ROOT
from lucyshop.lab.model.backend import BACKENDS
from lucyshop.lab.services.processes import end_children_on_sigterm
from lucyshop.lab.statuses import Mark, result_line

ANSWERS = {
    "1": "exercise_1_reuse_owner_label",
    "2": "exercise_2_cancel_while_delayed",
    "3": "exercise_3_remove_one_fence",
    "4": "exercise_4_sessions_vs_ceiling",
    "5": "exercise_5_renewal",
    "6": "exercise_6_records",
}
RECEIPTS = {
    "5": "evidence/ch13-exercise5-renewal-receipt.json",
    "6": "evidence/ch13-exercise6-records-receipt.json",
}


def receipt_path(path: str | Path, exercise: str, out: Path | None) -> Path:
    """Where a measured answer's receipt goes: ``out``, else ``runs/`` beside the exercises
    file; the kit's ``evidence/`` only for the reference's own file. A learner's ``out`` inside
    ``evidence/`` is refused (ValueError)."""
    answers = Path(path).resolve()
    reference = answers == (ROOT / "solutions" / EXERCISES).resolve()
    if out is None:
        name = Path(RECEIPTS[exercise]).name
        return ROOT / RECEIPTS[exercise] if reference else answers.parent / "runs" / name
    evidence = (ROOT / "evidence").resolve()
    if not reference and out.resolve().is_relative_to(evidence):
        raise ValueError(
            f"--out {out}: evidence/ holds the kit's receipts, which make check compares"
            " against; write yours elsewhere (the default is runs/ beside your exercises.py)"
        )
    return out


def what_it_shows(function: Callable[..., Any]) -> str:
    """The answer's docstring from "What it shows:" on, on one line."""
    text = (function.__doc__ or "").split("What it shows:", 1)[-1]
    return " ".join(text.split())


@contextlib.contextmanager
def _directory(directory: Path | None, exercise: str) -> Iterator[Path]:
    if directory is not None:
        yield directory
        return
    with tempfile.TemporaryDirectory(prefix=f"ch13-exercise{exercise}-") as tmp:
        yield Path(tmp)


def _shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(path: str, argv: Sequence[str] | None = None) -> int:
    """Run one answer of the exercises file at ``path``; 3 while it is still a stub."""
    parser = argparse.ArgumentParser(prog=f"python {path}", description=__doc__.split("\n")[0])
    parser.add_argument("exercise", choices=[*ANSWERS, "verify"])
    parser.add_argument("receipt", nargs="?", type=Path, help="with verify: the receipt")
    parser.add_argument("--dir", type=Path, help="exercises 1-4: where the shops go")
    parser.add_argument("--out", type=Path, help="exercises 5-6: the receipt")
    parser.add_argument("--quick", action="store_true", help="exercises 5-6: a small run")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="embedded",
        help="exercises 5-6: the model; scripted is the grader's stand-in (no model, no figures)",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    answers = load_answers(path)
    if args.exercise == "verify":
        if args.receipt is None:
            parser.error("verify needs the receipt's path")
        return exercise_receipts.verify(args.receipt, answers.chapter())
    function = getattr(answers, ANSWERS[args.exercise])
    end_children_on_sigterm()  # a kill of this process still ends the workers it started
    try:
        if args.exercise in RECEIPTS:
            try:
                out = receipt_path(path, args.exercise, args.out)
            except ValueError as refused:
                parser.error(str(refused))
            out.parent.mkdir(parents=True, exist_ok=True)
            function(out, quick=args.quick, seed=args.seed, backend=args.backend, progress=True)
            print("\n".join(exercise_receipts.headline(json.loads(out.read_text()))))
            print(f"receipt written to {_shown(out)}")
        else:
            with _directory(args.dir, args.exercise) as directory:
                print(json.dumps(function(directory), indent=1, default=str))
    except NotStarted as stub:
        print(result_line(Mark.NOT_STARTED, f"exercise {args.exercise}", str(stub)))
        return 3
    print(f"\nWhat it shows: {what_it_shows(function)}")
    return 0
