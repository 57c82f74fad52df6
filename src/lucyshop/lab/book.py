"""The book beside the kit: the chapter's code read from its text, the thin entries its paths
name, and Part A's receipt in the shape its blocks read.

The chapter (``chapter13.txt`` in ``shared/`` beside the kit: plain text, no code fences)
prints Python blocks, each followed by what it prints, and shell commands (the experiment, the
checkpoint with and without ``--evidence``); ``blocks`` and ``commands`` find them, and
tests/book runs them from the kit's root. The paths they name are
thin files under ``book/textbook/`` that hand on to the kit: ``learner_names`` (the learner's
file), ``run_checkpoint`` and ``run_experiment``. ``book_receipt`` maps the kit's Part A
receipt onto the fields the chapter reads, rounded to its three decimals, and names the
receipt it came from; ``python -m lucyshop.lab.book`` (``make book-receipt``) rewrites
``docs/evidence/book-ch13/ch13-leases-receipt-v1.json`` from ``evidence/``.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from lucyshop import chosen_impl
from lucyshop.lab.checkpoint.launch import SCRIPT
from lucyshop.lab.evidence import receipts
from lucyshop.lab.experiment.receipt import RULES, pilot_seconds
from lucyshop.lab.loader import CHAPTER, ROOT, load_impl

CHAPTER_TEXT = ROOT.parent / "shared" / "chapter13.txt"
KIT_RECEIPT = ROOT / "evidence" / "ch13-leases-receipt.json"
BOOK_RECEIPT = ROOT / "docs" / "evidence" / "book-ch13" / "ch13-leases-receipt-v1.json"
CHECKPOINT = ROOT / SCRIPT
DECIMALS = 3  # the chapter prints its seconds and shares to three decimals
# The kit's lease rules (``experiment.receipt.RULES``) by the names the chapter gives them.
RULE_NAMES = {
    "median": "pilot median",
    "p90": "pilot 90th percentile",
    "twice_max": "twice the pilot maximum",
}
QUICK_ENV = "LUCYSHOP_BOOK_QUICK"  # "1": the book's experiment command runs --quick
EVIDENCE_NAME = "ch13-worker-recovery-evidence.json"  # a bare --evidence writes learner/runs/ this
SHELL = "uv run python"  # how the chapter starts a command
PART_B = "Part B:"  # the heading paragraph from which a block is Part B's
LOOKAHEAD = 12  # the most paragraphs one block spans (the chapter's longest has 9)


# ---------------------------------------------------------------- the chapter's code


class Block(NamedTuple):
    """One Python block of the chapter: its part, its source, and the lines it prints there."""

    part: str  # "A" or "B"
    source: str
    printed: tuple[str, ...]  # () where the block prints nothing


def blocks(text: str) -> list[Block]:
    """Every Python block of the chapter's text, in order.

    With no fences to go by, a block is the longest run of paragraphs (up to ``LOOKAHEAD``)
    that compiles as Python and holds a call, an assignment or an import; prose and headings
    do not compile, and a one-word heading holds none of those. A block that prints is followed
    by the paragraph of its output.
    """
    paragraphs = text.split("\n\n")
    part_b = next(i for i, p in enumerate(paragraphs) if p.startswith(PART_B))
    found: list[Block] = []
    start = 0
    while start < len(paragraphs):
        ends = range(start + 1, min(start + LOOKAHEAD, len(paragraphs)) + 1)
        end = max((e for e in ends if _is_code("\n\n".join(paragraphs[start:e]))), default=None)
        if end is None:
            start += 1
            continue
        source = "\n\n".join(paragraphs[start:end])
        prints = "print(" in source and end < len(paragraphs)
        printed = tuple(paragraphs[end].split("\n")) if prints else ()
        found.append(Block("A" if start < part_b else "B", source, printed))
        start = end + prints
    return found


def _is_code(text: str) -> bool:
    try:
        compile(text, "<chapter>", "exec")
    except SyntaxError:
        return False
    return any(sign in text for sign in ("(", "=", "import "))


def commands(text: str) -> list[list[str]]:
    """Each shell command of the chapter, as the arguments after ``uv run python``; a line that
    ends in a backslash goes on to the next."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if not line.startswith(f"{SHELL} "):
            continue
        words = line.removeprefix(SHELL).split()
        while words and words[-1] == "\\" and index + 1 < len(lines):
            index += 1
            words = words[:-1] + lines[index].split()
        found.append(words)
    return found


# ---------------------------------------------------------------- the thin entries


def kit_of(entry: str | os.PathLike[str]) -> Path:
    """The kit an entry under ``book/textbook/<room>/`` belongs to: the folder ``book/`` is in."""
    return Path(entry).resolve().parents[3]


def learner_of(entry: str | os.PathLike[str]) -> Path:
    """The learner's chapter file of the entry's kit."""
    return kit_of(entry) / "learner" / CHAPTER


def learner_names(entry: str | os.PathLike[str]) -> dict[str, Any]:
    """Every name the learner's file defines, loaded as ``make check`` loads it, for the
    entry's globals: ``runpy.run_path`` of the entry then hands them to the chapter."""
    module = load_impl(learner_of(entry))
    return {name: value for name, value in vars(module).items() if not name.startswith("__")}


def with_impl(entry: str | os.PathLike[str], argv: Sequence[str]) -> list[str]:
    """``argv`` naming the file to run: its own ``--impl``, else the kit's rule
    (``$LEASES_IMPL``, else the learner's file, here the one beside the entry)."""
    if any(arg == "--impl" or arg.startswith("--impl=") for arg in argv):
        return list(argv)
    return ["--impl", str(chosen_impl(otherwise=learner_of(entry))), *argv]


def checkpoint_arguments(entry: str | os.PathLike[str], argv: Sequence[str]) -> list[str]:
    """The checkpoint's arguments: a bare ``--evidence`` (the chapter names no file) writes
    ``learner/runs/ch13-worker-recovery-evidence.json``, which the checkpoint then prints."""
    args = with_impl(entry, argv)
    if "--evidence" in args:
        after = args.index("--evidence") + 1
        if after == len(args) or args[after].startswith("-"):
            args.insert(after, str(kit_of(entry) / "learner" / "runs" / EVIDENCE_NAME))
    return args


def run_checkpoint(entry: str | os.PathLike[str], argv: Sequence[str]) -> None:
    """Run the kit's checkpoint as its own command would (it exits with its status)."""
    sys.argv = [str(CHECKPOINT), *checkpoint_arguments(entry, argv)]
    runpy.run_path(str(CHECKPOINT), run_name="__main__")


def experiment_arguments(
    entry: str | os.PathLike[str], argv: Sequence[str], environ: Mapping[str, str]
) -> list[str]:
    """The experiment's arguments, with ``--quick`` added where ``$LUCYSHOP_BOOK_QUICK`` is 1
    (the whole run takes about twenty minutes; the tests run the chapter's command quick)."""
    args = with_impl(entry, argv)
    if environ.get(QUICK_ENV) == "1" and "--quick" not in args:
        args.append("--quick")
    return args


def run_experiment(entry: str | os.PathLike[str], argv: Sequence[str]) -> int:
    """Run the Part A experiment (``python -m lucyshop.lab.experiment``); its exit status."""
    from lucyshop.lab.experiment.__main__ import main  # the command itself, loaded when run

    return main(experiment_arguments(entry, argv, os.environ))


# ---------------------------------------------------------------- Part A's receipt, book-shaped


def _rounded(value: float) -> float:
    return round(value, DECIMALS)


def _rule_row(rule: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """One lease rule's false-expiry row, by the chapter's name for the rule."""
    return {
        "rule": RULE_NAMES[rule],
        "lease_seconds": _rounded(row["lease"]),
        "predicted_false_expiry": _rounded(row["predicted_share"]),
        "measured_false_expiry": _rounded(row["measured_share"]),
        "stale_completions_accepted": row["stale_completions_accepted"],
    }


def book_receipt(kit: Mapping[str, Any], source: str | os.PathLike[str]) -> dict[str, Any]:
    """The fields the chapter's Part A blocks read, from the kit's receipt ``kit`` (read from
    ``source``): its pilot turns, its three lease rules, its detection run and its recovery
    samples, every second and share rounded to three decimals; counts as they are."""
    figures, provenance, settings = kit["figures"], kit["provenance"], kit["settings"]
    detection = figures["detection"]
    return {
        "pilot_turn_seconds": [_rounded(s) for s in pilot_seconds(kit["observations"])],
        "false_expiry": [_rule_row(rule, figures["false_expiry"][rule]) for rule in RULES],
        "detection": {
            "lease_seconds": _rounded(detection["lease"]),
            "turn_seconds": _rounded(detection["typical_turn"]),
            "predicted_mean_delay": _rounded(detection["predicted_delay"]),
            "measured_mean_delay": _rounded(detection["measured_mean_delay"]),
        },
        "recovery": [
            {
                "model": model,
                "placed_again": counts["placed_again"],
                "looked_up": counts["looked_up_right_key"],
                "samples": counts["samples"],
            }
            for model, counts in figures["recovery"].items()
        ],
        "provenance": {
            "derived_by": "python -m lucyshop.lab.book (make book-receipt)",
            "note": (
                "seconds and shares rounded to 3 decimals; looked_up counts lookups by the"
                " order's own key (the kit's looked_up_right_key)"
            ),
            "source": {
                **receipts.file_record(source),
                "model": provenance["model"]["name"],
                "backend": provenance["backend"],
                "host": provenance["hostname"],
                "date": provenance["started_utc"],
                "command": provenance["command"],
                "quick": settings["quick"],
            },
        },
    }


def write_book_receipt(source: Path = KIT_RECEIPT, out: Path = BOOK_RECEIPT) -> dict[str, Any]:
    """Write the book-shaped receipt of ``source`` to ``out``; what was written."""
    shaped = book_receipt(json.loads(source.read_text(encoding="utf-8")), source)
    receipts.write_receipt(out, shaped)
    return shaped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.book",
        description="Write Part A's receipt in the shape the chapter's blocks read.",
    )
    parser.add_argument("--source", type=Path, default=KIT_RECEIPT, help="the kit's receipt")
    parser.add_argument("--out", type=Path, default=BOOK_RECEIPT, help="the book-shaped receipt")
    args = parser.parse_args(argv)
    write_book_receipt(args.source, args.out)
    print(f"wrote {receipts.shown(args.out)} from {receipts.shown(args.source)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
