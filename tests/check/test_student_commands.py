"""The commands a student runs by hand: where they write, and that they need no activated venv.

``python learner/exercises.py 5 --quick``, as the exercises' docstring said, once overwrote the
kit's ``evidence/ch13-exercise5-renewal-receipt.json``; the next ``make check`` then failed on
the kit's own receipt, naming nothing. A learner's measured run now writes under ``runs/``
beside their exercises file and prints where, and an ``--out`` inside ``evidence/`` is refused.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lucyshop import IMPL_ENV
from lucyshop.lab.exercises.book import receipt_path

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"
RECEIPT = "ch13-exercise5-renewal-receipt.json"


def evidence_digest() -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(EVIDENCE.iterdir())
        if path.is_file()
    }


def without_venv() -> dict[str, str]:
    """The environment of a shell where the venv is not activated: no VIRTUAL_ENV, and no
    venv on PATH (the command names the venv's python itself)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv)
    env.pop(IMPL_ENV, None)
    return env


def by_hand(argv: list[str], *, timeout: float) -> subprocess.CompletedProcess:
    """``argv`` run from the kit's root as a student types it, outside an activated venv."""
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=without_venv(),
        check=False,
    )


def student(tmp_path: Path, source: Path) -> Path:
    """A student's folder holding the exercises and chapter files of ``source``."""
    folder = tmp_path / "student"
    folder.mkdir()
    for name in ("exercises.py", "ch13_leases.py"):
        shutil.copy(source / name, folder / name)
    return folder


def test_a_learners_receipt_goes_beside_their_file_and_only_the_reference_writes_evidence():
    learner = ROOT / "learner" / "exercises.py"
    assert receipt_path(learner, "5", None) == ROOT / "learner" / "runs" / RECEIPT
    reference = ROOT / "solutions" / "exercises.py"
    assert receipt_path(reference, "5", None) == EVIDENCE / RECEIPT
    with pytest.raises(ValueError, match="evidence/ holds the kit's receipts"):
        receipt_path(learner, "5", EVIDENCE / RECEIPT)
    with pytest.raises(ValueError, match="evidence/ holds the kit's receipts"):
        receipt_path(learner, "6", ROOT / "learner" / ".." / "evidence" / "x.json")


def test_an_out_inside_evidence_is_refused_before_anything_runs(tmp_path):
    folder = student(tmp_path, ROOT / "learner")
    before = evidence_digest()
    done = by_hand(
        [
            sys.executable,
            str(folder / "exercises.py"),
            "5",
            "--quick",
            "--out",
            str(EVIDENCE / RECEIPT),
        ],
        timeout=600,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "evidence/ holds the kit's receipts" in done.stderr
    assert evidence_digest() == before


@pytest.mark.model
@pytest.mark.timeout(2000)
def test_a_measured_run_by_hand_writes_under_the_students_folder_and_says_where(tmp_path):
    """A finished exercise 5 (the reference's answer, copied into a student's folder), run as
    the docstring says, from the kit's root and outside an activated venv: the receipt lands in
    the student's runs/, the last lines say where, and evidence/ is byte for byte unchanged."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("exercise 5 measures real model turns: make model")
    folder = student(tmp_path, ROOT / "solutions")
    before = evidence_digest()
    # deadlines far past the work (about a minute on a quiet machine), not measures of it
    done = by_hand([sys.executable, str(folder / "exercises.py"), "5", "--quick"], timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = folder / "runs" / RECEIPT
    assert written.is_file()
    assert re.search(rf"^receipt written to {re.escape(str(written))}$", done.stdout, re.MULTILINE)
    assert evidence_digest() == before
    verified = by_hand(
        [sys.executable, str(folder / "exercises.py"), "verify", str(written)], timeout=600
    )
    assert verified.returncode == 0 and "receipt verification passed" in verified.stdout, (
        verified.stdout
    )


def test_the_documented_commands_name_the_venvs_python():
    """A command a student copies must work in a shell where the venv is not activated."""
    readme = (ROOT / "README.md").read_text()
    students = readme.split("## For students", 1)[1].split("\n## ", 1)[0]
    for path, text in [
        ("learner/exercises.py", (ROOT / "learner" / "exercises.py").read_text()),
        ("learner/ch13_postgres.py", (ROOT / "learner" / "ch13_postgres.py").read_text()),
        ("README.md, For students", students),
    ]:
        bare = re.findall(r"(?<![\w/.])python (?:-m |learner/|checkpoints/)\S*", text)
        assert not bare, (path, bare)
