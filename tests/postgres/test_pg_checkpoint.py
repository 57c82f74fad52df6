"""The exercise-7 checkpoint as a student runs it: passes on the reference (the judge agreeing,
from the files it kept), stops at the first stub, and fails a file whose fence lets a stale
holder write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lucyshop.lab.checkpoint import judge
from lucyshop.lab.checkpoint.cases import KILLED, LIVE_STALE, ON_POSTGRES
from lucyshop.lab.checkpoint.launch import checkpoint_command

ROOT = Path(__file__).resolve().parents[2]


def checkpoint(impl: str | Path, pg_server, *more: str) -> subprocess.CompletedProcess:
    env = os.environ | {"LUCYSHOP_PG_DSN": pg_server.dsn}  # the suite's server, not a new one
    return subprocess.run(
        [*checkpoint_command(impl, postgres=True), *more],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_the_reference_passes_both_cases(pg_server, tmp_path):
    keep, evidence = tmp_path / "keep", tmp_path / "evidence.json"
    done = checkpoint("solutions", pg_server, "--keep", str(keep), "--evidence", str(evidence))
    assert done.returncode == 0, done.stdout + done.stderr
    passed = [line for line in done.stdout.splitlines() if line.startswith("PASS")]
    assert [line.split()[1] for line in passed] == [str(c.number) for c in ON_POSTGRES]
    assert "stale completion/supplier/transcript refused" in done.stdout
    status, cases = judge.judge(evidence, keep, judge.POSTGRES_RULES)
    assert (status, [case.passed for case in cases]) == ("PASSING", [True] * len(ON_POSTGRES))
    # The judge reads the tables kept: a stale row of generation 1 there fails its case, and
    # so does a kept file that is a link.
    kept = keep / f"case{KILLED.number}-kept" / judge.TABLES
    tables = json.loads(kept.read_text())
    tables["transcript"].append({"generation": 1, "message": {"text": "late"}})
    kept.write_text(json.dumps(tables))
    status, cases = judge.judge(evidence, keep, judge.POSTGRES_RULES)
    assert (status, cases[0].passed, cases[1].passed) == ("FAILING", False, True), cases
    assert "transcript rows by generation" in cases[0].message, cases[0]
    kept.unlink()
    kept.symlink_to(keep / f"case{LIVE_STALE.number}-kept" / judge.TABLES)
    _status, cases = judge.judge(evidence, keep, judge.POSTGRES_RULES)
    assert not cases[0].passed and "is not a file of this" in cases[0].message, cases[0]


def test_the_stubs_are_not_started(pg_server):
    done = checkpoint("learner", pg_server)
    assert done.returncode == 3, done.stdout + done.stderr
    stopped = [line for line in done.stdout.splitlines() if line.startswith("NOT STARTED  ")]
    assert stopped and "claim() is not started" in stopped[0], done.stdout
    assert "checkpoint NOT STARTED" in done.stdout, done.stdout


@pytest.mark.slow
def test_a_file_without_the_fence_fails(pg_server, tmp_path):
    """``assert_current`` that refuses nothing: the stale holder's writes go through."""
    shutil.copy(ROOT / "solutions" / "ch13_leases.py", tmp_path / "ch13_leases.py")
    source = (ROOT / "solutions" / "ch13_postgres.py").read_text()
    head, _, rest = source.partition("def assert_current(")
    docstring_end = rest.index('"""', rest.index('"""') + 3) + 3
    body_end = rest.index("\ndef observe(")
    gutted = rest[:docstring_end] + "\n    return None\n\n" + rest[body_end:]
    (tmp_path / "ch13_postgres.py").write_text(head + "def assert_current(" + gutted)
    done = checkpoint(tmp_path / "ch13_leases.py", pg_server)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAILING  {LIVE_STALE.number} {LIVE_STALE.name}" in done.stdout, done.stdout
