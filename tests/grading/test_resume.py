"""Grading resumes: each student is kept the moment they finish, Ctrl-C keeps what finished
and ends every check, and a rerun skips what is kept under the same files, rubric and kit.

The interrupt is a real SIGINT to a real ``python -m lucyshop.lab.grade`` process while three
checks run; the hand-ins that finish at once (a folder without the file, an empty file) are
the ones that must survive it.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grading_class import STUBS, stubs_with

from lucyshop.lab.check.results import Row
from lucyshop.lab.checkpoint.cases import Case
from lucyshop.lab.grade import rubric, store, submissions
from lucyshop.lab.grade.__main__ import main
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import ROOT
from lucyshop.lab.services.processes import processes_mentioning

SLEEPS = "import time\n\ntime.sleep(600)\n"  # at import: the check hangs until it is ended
WAIT = 60.0  # seconds any one wait below may take


def until(condition, what: str, seconds: float = WAIT):
    """Poll ``condition`` until it is truthy, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds:g}s: {what}")


def grader(hand_ins: Path, out: Path, scratch: Path, *extra: str) -> subprocess.Popen:
    """``python -m lucyshop.lab.grade`` as an instructor runs it, its checks under ``scratch``."""
    env = os.environ | {"TMPDIR": str(scratch), "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-m", "lucyshop.lab.grade", str(hand_ins), "--out", str(out)]
    return subprocess.Popen(
        [*argv, "--no-checkpoint", "--no-progress", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it: a process inherits an ignored SIGINT, and in a
        # whole make test this pytest worker's may be (the grader then never saw the signal
        # and graded on to exit 0).
        preexec_fn=_default_sigint,  # noqa: PLW1509 - one signal call, no locks
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kept_files(out: Path) -> dict[str, int]:
    """Each kept result file and its modification time (ns)."""
    results = out / "results"
    return (
        {p.name: p.stat().st_mtime_ns for p in results.glob("*.json")} if results.is_dir() else {}
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_c_keeps_who_finished_ends_every_check_and_a_rerun_goes_on(tmp_path):
    hand_ins, out, scratch = tmp_path / "class", tmp_path / "grades", tmp_path / "scratch"
    scratch.mkdir()
    (hand_ins / "no file").mkdir(parents=True)
    (hand_ins / "no file" / "notes.txt").write_text("forgot it\n")
    (hand_ins / "empty.py").write_text("")
    slow = ["slow 1", "slow 2", "slow 3"]
    for name in slow:
        (hand_ins / f"{name}.py").write_text(stubs_with(SLEEPS))
    first = grader(hand_ins, out, scratch, "--jobs", "5")
    try:
        until(lambda: len(kept_files(out)) == 2, "the two quick hand-ins kept while it runs")
        # The three checks are running (their imports sleep), each under the scratch TMPDIR.
        until(lambda: len(processes_mentioning(str(scratch))) >= 3, "three checks running")
        kept_before = kept_files(out)
        first.send_signal(signal.SIGINT)
        stdout, stderr = first.communicate(timeout=WAIT)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate(timeout=WAIT)
    assert first.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted: 2 of 5 graded, kept; rerun to go on"
    assert "Traceback" not in stderr + stdout
    assert until(lambda: not processes_mentioning(str(scratch)), "every check ended", 10) is True
    assert kept_files(out) == kept_before, "what finished is kept, untouched"
    assert not (out / "grades.csv").exists(), "the gradebook is written when the class is done"
    for name in ("no file", "empty"):
        assert (out / "feedback" / f"{name}.txt").is_file()
        assert (out / "gradescope" / name / "results.json").is_file()

    # Rerun: the slow hand-ins are fixed (two emptied, one the stubs: a real check).
    for name in slow[:2]:
        (hand_ins / f"{name}.py").write_text("")
    (hand_ins / f"{slow[2]}.py").write_text(STUBS.read_text(encoding="utf-8"))
    second = grader(hand_ins, out, scratch, "--jobs", "2")
    stdout, stderr = second.communicate(timeout=240)
    assert second.returncode == 0, stderr
    assert "skipped 2 of 5 hand-ins already graded" in stdout
    after = kept_files(out)
    assert len(after) == 5 and all(after[name] == kept_before[name] for name in kept_before)
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == sorted(["no file", "empty", *slow])
    assert rows["no file"]["status"] == "NO FILE" and rows["slow 1"]["status"] == "EMPTY"
    assert rows["slow 3"]["status"] not in ("STOPPED", "")
    assert not processes_mentioning(str(scratch))


def quick_class(directory: Path) -> Path:
    """Hand-ins that need no check: a folder without the file, an empty file."""
    (directory / "ana").mkdir(parents=True)
    (directory / "bo.py").write_text("")
    return directory


def test_a_rerun_skips_what_is_kept_and_force_regrades(tmp_path, capsys):
    hand_ins, out = quick_class(tmp_path / "class"), tmp_path / "grades"
    argv = [str(hand_ins), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    first = kept_files(out)
    assert len(first) == 2 and "skipped" not in capsys.readouterr().out
    assert main(argv) == 0
    assert "skipped 2 of 2 hand-ins already graded" in capsys.readouterr().out
    assert kept_files(out) == first
    assert main([*argv, "--force"]) == 0
    assert "skipped" not in capsys.readouterr().out
    assert all(kept_files(out)[name] != first[name] for name in first), "--force regrades"


def test_a_changed_file_or_rubric_is_graded_again(tmp_path, capsys):
    hand_ins, out = quick_class(tmp_path / "class"), tmp_path / "grades"
    argv = [str(hand_ins), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    (hand_ins / "bo.py").write_text("\n")  # still empty, but not the same file
    capsys.readouterr()
    assert main(argv) == 0
    assert "skipped 1 of 2" in capsys.readouterr().out
    assert main([*argv, "--timeout", "123"]) == 0  # another rubric: everyone again
    assert "skipped" not in capsys.readouterr().out


def test_a_kept_result_reads_back_as_it_was_written(tmp_path):
    loaded = rubric.load()
    chapter = tmp_path / "class" / "ana" / "ch13_leases.py"
    chapter.parent.mkdir(parents=True)
    chapter.write_text("x = 1\n")
    found = submissions.find(tmp_path / "class")[0]
    verdict = Verdict(
        "CHECKED",
        [Row("claim", "function", "FAILING", 3, 4, "timed out")],
        "FAILING",
        [Case(0, "kill", True, "ok"), Case(1, "stop", False, "no")],
        feedback="table",
        seconds=12.5,
    )
    key = store.key(found, loaded, checkpoint=True)
    graded = store.Graded(found, verdict, 0.25, rubric.score(verdict, loaded), False)
    assert store.keep(tmp_path / "out", graded, loaded, key)
    back = store.kept(tmp_path / "out", found, key)
    assert back is not None and back.reused
    assert (back.verdict, back.similarity) == (verdict, 0.25)
    assert back.score.points == graded.score.points  # the total is kept, not the lines
    assert store.kept(tmp_path / "out", found, key | {"kit": "another kit"}) is None
    assert store.kept(tmp_path / "out", found, store.key(found, loaded, checkpoint=False)) is None
    document = json.loads((tmp_path / "out" / "gradescope" / "ana" / "results.json").read_text())
    assert document["score"] == graded.score.points
    # A check ended by Ctrl-C is no verdict: nothing of it is kept.
    stopped = store.Graded(
        found, Verdict("STOPPED"), None, rubric.score(Verdict("STOPPED"), loaded), False
    )
    assert not store.keep(tmp_path / "elsewhere", stopped, loaded, key)
    assert not (tmp_path / "elsewhere").exists()


def test_the_kit_version_changes_with_the_kit(tmp_path):
    for top in store.KIT:
        path = tmp_path / top
        if top.endswith(".toml"):
            path.write_text("[project]\n")
        else:
            path.mkdir(parents=True)
            (path / "a.py").write_text("x = 1\n")
    before = store.kit_version.__wrapped__(tmp_path)
    (tmp_path / "spec" / "__pycache__").mkdir()
    (tmp_path / "spec" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert store.kit_version.__wrapped__(tmp_path) == before, "caches are not the kit"
    (tmp_path / "src" / "lucyshop" / "proof").mkdir()
    (tmp_path / "src" / "lucyshop" / "proof" / "bench.py").write_text("x = 3\n")
    assert store.kit_version.__wrapped__(tmp_path) == before, "the proof decides no grade"
    (tmp_path / "checkpoints" / "a.py").write_text("x = 2\n")
    assert store.kit_version.__wrapped__(tmp_path) != before
