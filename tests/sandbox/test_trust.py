"""Nothing the student's code says about itself is taken on trust; the kit stays as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from sandbox_files import ROOT, STUBBED, check, rows, student_copy, tree

from lucyshop.lab.check.guard import MARKER, KitFiles, kit_changes, new_marker, sweep
from lucyshop.lab.check.subjects import stubs_in
from lucyshop.lab.checkpoint import judge


def test_a_file_that_exits_0_while_imported_cannot_be_checked(tmp_path):
    path = student_copy(tmp_path, "\nimport os\n\nos._exit(0)\n")
    status, data, output = check(path, tmp_path)
    assert status == 2, output
    assert "ended its process while being imported" in data["error"], data
    assert output.strip().splitlines() == [data["summary"]]


def test_a_file_that_edits_the_tests_fails_and_leaves_the_tree_unchanged(tmp_path):
    """The tests are not in the sandbox's view at all: the file cannot even find them."""
    before = tree("spec", "checkpoints")
    edit = f"\nwith open({str(ROOT / 'spec' / 'learner' / 'test_claim.py')!r}, 'w') as f:\n"
    path = student_copy(tmp_path, edit + "    f.write('def test_nothing():\\n    pass\\n')\n")
    status, data, output = check(path, tmp_path, "--no-checkpoint")
    assert status == 2, output
    assert "cannot be imported: FileNotFoundError" in data["error"], output
    assert "spec/learner/test_claim.py" in output
    assert tree("spec", "checkpoints") == before


def test_changed_kit_files_are_named_and_left_as_they_are(tmp_path):
    """On a kit of its own: a change made while ``make check`` runs is someone's edit, named, and
    never written over (the sandboxed code cannot make one)."""
    target = tmp_path / "checkpoints" / "ch13_worker_recovery.py"
    target.parent.mkdir()
    original = (ROOT / "checkpoints" / "ch13_worker_recovery.py").read_bytes()
    target.write_bytes(original)
    (tmp_path / "Makefile").write_text("test:\n")
    kit = KitFiles(tmp_path)
    target.write_bytes(original + b"\n# tampered\n")
    (tmp_path / "Makefile").unlink()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_new.py").write_text("def test_nothing():\n    pass\n")
    assert kit.changed() == [
        "Makefile",
        "checkpoints/ch13_worker_recovery.py",
        "tests/test_new.py (added)",
    ]
    assert target.read_bytes() == original + b"\n# tampered\n"
    assert not (tmp_path / "Makefile").exists()


def test_evidence_that_says_pass_without_the_files_is_a_failure(tmp_path):
    """A forged evidence file (what a student's code could write) does not pass the judge."""
    forged = {"arithmetic": {"result": "PASSING", "p50": 0.7, "p90": 1.2, "detection_delay": 3.6}}
    cases = {case.name: {"result": "PASSING"} for case in judge.CASES} | forged
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps({"cases": cases}))
    status, found = judge.judge(evidence, tmp_path)
    assert status == "FAILING"
    assert [case.passed for case in found] == [True] + [False] * (len(judge.CASES) - 1)
    assert all("no shop file was kept" in case.message for case in found[1:]), found


def test_a_case_that_started_and_never_ended_fails_by_name(tmp_path):
    evidence = tmp_path / "evidence.json"
    evidence.write_text(json.dumps({"cases": {"arithmetic": {"result": "STARTED"}}}))
    status, found = judge.judge(evidence, tmp_path)
    assert status == "FAILING"
    assert "ended inside this case" in found[0].message
    assert "never reached" in found[1].message


def test_a_stub_is_not_started_whatever_its_tests_report(tmp_path):
    """The row's status comes from the file's own syntax tree, read outside the file's process."""
    stub = tmp_path / "ch13_leases.py"
    stub.write_text(
        "from lucyshop.lab import NotStarted\n\n"
        "def claim(db, owner):\n    '''doc'''\n    raise NotStarted('claim', '13b')\n\n"
        "class Claim:\n    @property\n    def worker_id(self):\n"
        "        raise NotStarted('Claim.worker_id', '13b')\n\n"
        "def percentile(values, q):\n    return 1\n"
    )
    assert stubs_in(stub) == {"claim": "13b", "Claim.worker_id": "13b"}


@pytest.mark.slow
def test_a_stub_file_that_patches_the_grader_is_not_passing(tmp_path):
    patch = """
import lucyshop.lab.check.plugin.collect as collect

# swallow failures
collect.OutcomeWriter.write = lambda self, record: collect.OutcomeWriter.__dict__
_real = collect.describe
collect.describe = lambda *args: {"message": "", "not_started": None}
"""
    stub = tmp_path / "ch13_leases.py"
    stub.write_text((ROOT / "learner" / "ch13_leases.py").read_text() + patch)
    status, data, output = check(stub, tmp_path, "--no-checkpoint")
    assert status in (1, 3), output[-2000:]
    stubs = [row for row in data["rows"] if row["label"] in STUBBED]
    assert not any(row["status"] == "PASSING" for row in stubs), rows(data)


def test_the_sweep_ends_a_setsid_daemon_and_a_forked_child():
    """Every process carrying the run's marker ends, however it detached."""
    marker = new_marker()
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", daemon], env=os.environ | {MARKER: marker}, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 10
        while len(marked(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(marked(marker)) >= 2, "the daemon and its parent should be running"
        swept = sweep(marker)
        assert len(swept) >= 2, swept
        assert marked(marker) == [], "nothing with the marker is left"
    finally:
        if parent.poll() is None:
            parent.send_signal(signal.SIGKILL)
        parent.wait()


def marked(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARKER) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def test_kit_files_edited_since_the_commit_are_named(tmp_path):
    """``make check`` names the kit's files that differ from the commit (a test edited by accident
    changes every verdict), and never a student's own file."""
    run = lambda *argv: subprocess.run(
        ["git", "-C", str(tmp_path), *argv], check=True, capture_output=True
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "learner").mkdir()
    (tmp_path / "tests" / "test_claim.py").write_text("def test_it():\n    pass\n")
    (tmp_path / "learner" / "ch13_leases.py").write_text("x = 1\n")
    run("init", "-q")
    run("add", ".")
    run("-c", "user.name=k", "-c", "user.email=k@example.invalid", "commit", "-qm", "kit")
    assert kit_changes(tmp_path) == []
    (tmp_path / "tests" / "test_claim.py").write_text("def test_it():\n    assert True\n")
    (tmp_path / "learner" / "ch13_leases.py").write_text("x = 2\n")  # the student's: not named
    assert kit_changes(tmp_path) == ["tests/test_claim.py"]
    assert kit_changes(tmp_path / "not-a-checkout") == []
