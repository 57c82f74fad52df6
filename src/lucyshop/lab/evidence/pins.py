"""Which committed receipts are stale, and against which files.

    python -m lucyshop.lab.evidence.pins [FOLDER ...]     (make evidence-status)

A receipt's provenance keeps the sha256 of the files its run used (``receipts.provenance``'s
``code``). Most of them ran in the measurement and decide its figures: the receipt *pins*
them, and ``make test`` fails on a receipt whose pinned files changed, naming them, until it
is measured again. The files that only set up how the kit is built and its suite is run (the
Makefile, pyproject.toml, anything under ``tests/``, ``spec/`` or ``proof/``) decide no figure
a receipt states: a change to one of them is reported here, never a failure, so that editing the
Makefile does not call for ten minutes of re-measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.lab.evidence.receipts import file_record
from lucyshop.lab.loader import ROOT

SET_UP = ("Makefile", "pyproject.toml")  # and every file under tests/, spec/ and proof/
# Where receipts are kept: what the course shows, and the kit's proof of itself.
FOLDERS = (ROOT / "evidence", ROOT / "proof" / "receipts")


def pins(path: str) -> bool:
    """Whether a receipt that recorded ``path`` (relative to the kit) goes stale when it
    changes: everything but how the kit is built and tested."""
    return path not in SET_UP and not path.startswith(("tests/", "spec/", "proof/"))


@dataclass(frozen=True)
class Changed:
    """A file a receipt recorded whose bytes are no longer the ones measured."""

    where: str  # the provenance that recorded it: "/" (the receipt's own) or "/quiet", ...
    path: str
    gone: bool  # no longer in the kit at all

    def __str__(self) -> str:
        where = "" if self.where == "/" else f" ({self.where})"
        return f"{self.path}{' (gone)' if self.gone else ''}{where}"


def provenances(document: object, where: str = "") -> list[tuple[str, Mapping[str, Any]]]:
    """Every ``provenance`` in a receipt with where it sits: the top level's, and each run's
    that carries its own (``test-time.json``'s ``quiet`` and ``loaded``, ``bench.json``'s
    ``make_test``)."""
    found = []
    if isinstance(document, Mapping):
        for key, value in document.items():
            if key == "provenance" and isinstance(value, Mapping):
                found.append((where or "/", value))
            else:
                found += provenances(value, f"{where}/{key}")
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += provenances(value, f"{where}/{index}")
    return found


def changes(document: object, root: Path = ROOT) -> list[Changed]:
    """Every recorded file, in every provenance of ``document``, that differs from what ran."""
    found = []
    for where, provenance in provenances(document):
        for path, digest in provenance.get("code", {}).items():
            file = root / path
            if not file.is_file():
                found.append(Changed(where, path, gone=True))
            elif file_record(file)["sha256"] != digest:
                found.append(Changed(where, path, gone=False))
    return found


@dataclass(frozen=True)
class Staleness:
    """One receipt's changed files: the pinned ones (stale: measure again) and the rest."""

    name: str
    stale: list[Changed]
    drifted: list[Changed]  # set-up files changed since: reported, never failed

    @classmethod
    def of(cls, path: Path, root: Path = ROOT) -> Staleness:
        found = changes(json.loads(path.read_text(encoding="utf-8")), root)
        return cls(
            path.name,
            stale=[c for c in found if pins(c.path)],
            drifted=[c for c in found if not pins(c.path)],
        )

    def lines(self) -> list[str]:
        """What ``make evidence-status`` prints for this receipt."""
        if not self.stale and not self.drifted:
            return [f"{self.name}: fresh"]
        lines = [f"{self.name}: {'STALE, measure it again' if self.stale else 'fresh'}"]
        lines += [f"  pinned, changed: {changed}" for changed in self.stale]
        lines += [f"  set-up, changed (reported only): {changed}" for changed in self.drifted]
        return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.evidence.pins", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument(
        "folders", nargs="*", type=Path, help="default: evidence/ and proof/receipts/"
    )
    parser.add_argument(
        "--kit", type=Path, default=ROOT, help="what the receipts' paths are relative to"
    )
    args = parser.parse_args(argv)
    for folder in args.folders or FOLDERS:
        for path in sorted(folder.glob("*.json")):
            print("\n".join(Staleness.of(path, args.kit).lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
