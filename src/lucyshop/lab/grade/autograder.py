"""The Gradescope autograder: build its zip, and grade the one submission it is given.

    python -m lucyshop.lab.grade.autograder build [--out build/autograder.zip]
    python -m lucyshop.lab.grade.autograder run [--root /autograder]

The zip holds ``setup.sh`` and ``run_autograder`` at its root (Gradescope's layout) and the
kit under ``kit/``. ``setup.sh`` installs the kit once, when Gradescope builds the image;
``run_autograder`` grades ``/autograder/submission`` exactly as ``make grade`` grades one
student and writes ``/autograder/results/results.json``. Both honour ``AUTOGRADER_ROOT`` (a
directory standing in for ``/autograder``), which is how the kit's tests run them locally.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.grade import gradescope
from lucyshop.lab.grade import rubric as rubrics
from lucyshop.lab.grade.classroom import feedback_text, grade_one
from lucyshop.lab.grade.submissions import CHAPTER, EXERCISES, Submission
from lucyshop.lab.loader import ROOT

KIT = ("pyproject.toml", "README.md", "src", "tests", "checkpoints", "learner", "solutions")
KIT += ("grading", "evidence")
DEFAULT_ZIP = ROOT / "build" / "autograder.zip"

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
KIT="$ROOT/source/kit"
NEW_ENOUGH='import sys; sys.exit(sys.version_info < (3, 11))'
if ! command -v python3 >/dev/null || ! python3 -c "$NEW_ENOUGH"; then
    apt-get install -y python3.11 python3.11-venv || apt-get install -y python3 python3-venv
fi
PYTHON="$(command -v python3.11 || command -v python3)"
"$PYTHON" -m venv "$KIT/.venv"
"$KIT/.venv/bin/python" -m pip install -q --upgrade pip
"$KIT/.venv/bin/python" -m pip install -q -e "$KIT[dev,model]"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission; it writes $ROOT/results/results.json.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
KIT="$ROOT/source/kit"
PYTHON="${AUTOGRADER_PYTHON:-$KIT/.venv/bin/python}"
mkdir -p "$ROOT/results"
cd "$KIT"
PYTHONPATH="$KIT/src" exec "$PYTHON" -m lucyshop.lab.grade.autograder run --root "$ROOT"
"""


def kit_files(root: Path = ROOT) -> list[Path]:
    """The kit's files that the autograder needs, without caches or build outputs."""
    found = []
    for top in KIT:
        path = root / top
        found += [path] if path.is_file() else [p for p in path.rglob("*") if _kept(p)]
    return sorted(found)


def _kept(path: Path) -> bool:
    return (
        path.is_file()
        and not {"__pycache__", ".pytest_cache"} & set(path.parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    )


def build(out: Path = DEFAULT_ZIP, root: Path = ROOT) -> Path:
    """Write the autograder zip to ``out`` and return it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # a regular file, executable
            archive.writestr(info, text)
        for path in kit_files(root):
            if path.is_file():
                archive.write(path, Path("kit") / path.relative_to(root))
    return out


def submission_in(directory: Path) -> Submission:
    """The hand-in Gradescope put in ``directory``: its ``ch13_leases.py``, wherever it is."""
    found = sorted(directory.rglob(CHAPTER), key=lambda p: (len(p.parts), str(p)))
    if not found:
        return Submission("submission", None, problem=f"no {CHAPTER} in the submission; upload it")
    chapter = found[0]
    exercises = chapter.with_name(EXERCISES)
    return Submission("submission", chapter, exercises if exercises.is_file() else None)


def run(root: Path) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; return the document."""
    print(f"autograder: grading {root / 'submission'} with the kit at {ROOT}")
    rubric = rubrics.load()
    submission = submission_in(root / "submission")
    with tempfile.TemporaryDirectory(prefix="lucyshop-autograder-") as work:
        graded = grade_one(submission, Path(work) / "work", rubric)
    print(feedback_text(graded))  # Gradescope shows stdout to instructors only
    document = gradescope.results(graded.verdict, rubric, similarity=graded.similarity)
    results = root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    return document


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucyshop.lab.grade.autograder")
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="write the Gradescope autograder zip")
    build_command.add_argument("--out", type=Path, default=DEFAULT_ZIP)
    run_command = commands.add_parser("run", help="grade the submission (inside Gradescope)")
    run_command.add_argument("--root", type=Path, default=Path("/autograder"))
    args = parser.parse_args(argv)
    if args.command == "build":
        print(f"autograder: {build(args.out)}")
        return 0
    document = run(args.root)
    print(f"score {document['score']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
