"""The Gradescope autograder: build its zip, and grade the one submission it is given.

    python -m lucyshop.lab.grade.gradescope.autograder build [--out ZIP] [--timeout 600]
    python -m lucyshop.lab.grade.gradescope.autograder run [--root /autograder] [--timeout 600]

The zip holds ``setup.sh`` and ``run_autograder`` at its root (Gradescope's layout) and the
kit under ``kit/``. ``setup.sh`` installs the kit once, when Gradescope builds the image;
``run_autograder`` grades ``/autograder/submission`` exactly as ``make grade`` grades one
student and writes ``/autograder/results/results.json``. Both honour ``AUTOGRADER_ROOT`` (a
directory standing in for ``/autograder``), which is how the kit's tests run them locally.
Their templates are ``grading/gradescope/``; the proof (``make autograder-proof``,
``lucyshop.proof.gradescope``) runs both in a bare Debian root filesystem.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.grade import store
from lucyshop.lab.grade.classroom import feedback_text, grade_one
from lucyshop.lab.grade.gradescope import results
from lucyshop.lab.grade.rubric import Rubric, load, with_seconds
from lucyshop.lab.grade.submissions import Submission
from lucyshop.lab.loader import CHAPTER, EXERCISES, PG_FILE, ROOT

KIT = ("pyproject.toml", "README.md", "src", "spec", "checkpoints", "learner", "solutions")
KIT += ("grading", "evidence")
TEMPLATES = ROOT / "grading" / "gradescope"  # setup.sh and run_autograder, packed at the top
PROOF = ROOT / store.PROOF  # the kit's proof of itself grades nothing: not packed
DEFAULT_ZIP = ROOT / "build" / "autograder.zip"
GRADESCOPE_TIMEOUT = 600.0  # Gradescope's default autograder timeout, in seconds
# run_autograder's own time around the check (start, similarity, results.json, a killed
# check's wait): the check must stop this much before Gradescope's timeout to leave a result.
RESERVE = 60.0


def run_script(timeout: float = GRADESCOPE_TIMEOUT) -> str:
    """``run_autograder``, told the autograder timeout set on Gradescope."""
    if not (math.isfinite(timeout) and timeout > RESERVE):
        raise ValueError(f"the autograder timeout must be over {RESERVE:g} s, not {timeout!r}")
    return _filled("run_autograder", "@TIMEOUT@", f"{timeout:g}")


def _filled(name: str, placeholder: str, value: str) -> str:
    template = (TEMPLATES / name).read_text(encoding="utf-8")
    if template.count(placeholder) != 1:
        raise ValueError(f"{TEMPLATES / name} must name {placeholder} once")
    return template.replace(placeholder, value)


def deadline(rubric: Rubric, timeout: float = GRADESCOPE_TIMEOUT) -> float:
    """The check's deadline inside Gradescope's ``timeout``: the rubric's, or less."""
    if not timeout > RESERVE:
        raise ValueError(f"the autograder timeout must be over {RESERVE:g} s, not {timeout!r}")
    return min(rubric.seconds, timeout - RESERVE)


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
        and not path.resolve().is_relative_to(TEMPLATES)  # packed once, at the zip's top
        and not path.resolve().is_relative_to(PROOF)
    )


def build(
    out: Path = DEFAULT_ZIP,
    root: Path = ROOT,
    *,
    timeout: float = GRADESCOPE_TIMEOUT,
) -> Path:
    """Write the autograder zip to ``out`` and return it. ``timeout``: the autograder timeout
    that will be set on Gradescope. Its ``setup.sh`` installs the kit's ``grade`` extra only:
    the measured exercises are graded on the scripted stand-in, so no model is built."""
    scripts = {
        "setup.sh": (TEMPLATES / "setup.sh").read_text(encoding="utf-8"),
        "run_autograder": run_script(timeout),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # a regular file, executable
            archive.writestr(info, text)
        for path in kit_files(root):
            if path.is_file():
                archive.write(path, Path("kit") / path.relative_to(root))
    return out


def installed_extras(built: Path) -> str:
    """The extras the ``setup.sh`` in the zip ``built`` installs."""
    return _baked(built, "setup.sh", r'^EXTRAS="([^"]*)"')


def built_timeout(built: Path) -> float:
    """The Gradescope timeout the ``run_autograder`` in the zip ``built`` was written for."""
    return float(_baked(built, "run_autograder", r"AUTOGRADER_TIMEOUT:-([0-9.]+)\}"))


def _baked(built: Path, name: str, pattern: str) -> str:
    with zipfile.ZipFile(built) as archive:
        script = archive.read(name).decode("utf-8")
    found = re.search(pattern, script, re.MULTILINE)
    if found is None:
        raise ValueError(f"{built}: its {name} does not match {pattern}")
    return found[1]


def submission_in(directory: Path) -> Submission:
    """The hand-in Gradescope put in ``directory``: its ``ch13_leases.py``, wherever it is, with
    the ``exercises.py`` and ``ch13_postgres.py`` beside it."""
    found = sorted(directory.rglob(CHAPTER), key=lambda p: (len(p.parts), str(p)))
    if not found:
        return Submission("submission", None, problem=f"no {CHAPTER} in the submission; upload it")
    chapter = found[0]
    exercises, postgres = chapter.with_name(EXERCISES), chapter.with_name(PG_FILE)
    return Submission(
        "submission",
        chapter,
        exercises if exercises.is_file() else None,
        postgres=postgres if postgres.is_file() else None,
    )


def run(root: Path, timeout: float = GRADESCOPE_TIMEOUT) -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; return the document.

    ``timeout`` is Gradescope's for the whole run: the check gets ``deadline`` of it, so a
    submission that hangs still gets a TIMED OUT result before Gradescope kills the run.
    """
    rubric = load()
    rubric = with_seconds(rubric, deadline(rubric, timeout))
    print(f"autograder: grading {root / 'submission'} with the kit at {ROOT}")
    print(f"autograder: the check may take {rubric.seconds:g} s (timeout {timeout:g} s)")
    submission = submission_in(root / "submission")
    with tempfile.TemporaryDirectory(prefix="lucyshop-autograder-") as work:
        graded = grade_one(submission, Path(work) / "work", rubric)
    print(feedback_text(graded))  # Gradescope shows stdout to instructors only
    document = results.document(
        graded.verdict, rubric, scored=graded.score, similarity=graded.similarity
    )
    written = root / "results" / "results.json"
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    return document


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucyshop.lab.grade.gradescope.autograder")
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="write the Gradescope autograder zip")
    build_command.add_argument("--out", type=Path, default=DEFAULT_ZIP)
    build_command.add_argument(
        "--timeout",
        type=float,
        default=GRADESCOPE_TIMEOUT,
        help="the autograder timeout you will set on Gradescope, in seconds (default 600)",
    )
    run_command = commands.add_parser("run", help="grade the submission (inside Gradescope)")
    run_command.add_argument("--root", type=Path, default=Path("/autograder"))
    run_command.add_argument(
        "--timeout",
        type=float,
        default=GRADESCOPE_TIMEOUT,
        help="the autograder timeout set on Gradescope, in seconds (default 600)",
    )
    args = parser.parse_args(argv)
    if args.command == "build":
        try:
            built = build(args.out, timeout=args.timeout)
        except ValueError as error:
            parser.error(str(error))
        print(f"autograder: {built} (setup.sh installs the kit's [{installed_extras(built)}])")
        return 0
    try:
        document = run(args.root, args.timeout)
    except ValueError as error:
        parser.error(str(error))
    print(f"score {document['score']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
