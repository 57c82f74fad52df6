"""Helpers of the sandbox and hostile-file suite: a student's file made from the reference,
and one ``make check`` run of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lucyshop.lab.given.stubs import stub_nodes

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
# The learner's stubs; the chapter's other functions the book gives whole, and they pass as given.
STUBBED = tuple(stub_nodes(ROOT / "learner" / "ch13_leases.py"))


def student_copy(directory: Path, appended: str = "") -> Path:
    """The reference answers as a student's file in ``directory``, with ``appended`` at its end
    (rebinding a function there changes what every caller gets), and exercise 7's stubs beside
    it (NOT STARTED: none of its tests runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    chapter = directory / "ch13_leases.py"
    chapter.write_text((SOLUTIONS / "ch13_leases.py").read_text() + appended, encoding="utf-8")
    (directory / "exercises.py").write_text((SOLUTIONS / "exercises.py").read_text())
    (directory / "ch13_postgres.py").write_text((ROOT / "learner" / "ch13_postgres.py").read_text())
    return chapter


def check(path: Path, tmp: Path, *args: str, timeout: float = 900) -> tuple[int, dict, str]:
    """``python -m lucyshop.lab.check --impl PATH --json``: (exit, the JSON, what it
    printed)."""
    target = tmp / "result.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lucyshop.lab.check",
            "--impl",
            str(path),
            "--json",
            str(target),
        ]
        + list(args),
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    data = json.loads(target.read_text()) if target.exists() else {}
    return result.returncode, data, result.stdout + result.stderr


def rows(data: dict) -> dict[str, dict]:
    return {row["label"]: row for row in data["rows"]}


def tree(*names: str) -> dict[str, bytes]:
    """Every file under the kit's ``names`` directories, to prove a run left them as they were."""
    return {
        str(path): path.read_bytes()
        for name in names
        for path in sorted((ROOT / name).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
