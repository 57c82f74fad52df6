"""The exercise-7 checkpoint as a student runs it: passes on the reference, stops at the first
stub, and fails a file whose fence lets a stale holder write."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "checkpoints" / "ch13_postgres_recovery.py"


def checkpoint(impl: str | Path, pg_server) -> subprocess.CompletedProcess:
    env = os.environ | {"LUCYSHOP_PG_DSN": pg_server.dsn}  # the suite's server, not a new one
    return subprocess.run(
        [sys.executable, str(CHECKPOINT), "--impl", str(impl)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_the_reference_passes_both_cases(pg_server):
    done = checkpoint("solutions", pg_server)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASS") == 2, done.stdout
    assert "stale writes refused: completion/supplier/transcript" in done.stdout


def test_the_stubs_are_not_started(pg_server):
    done = checkpoint("learner", pg_server)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "NOT STARTED  1 killed holder: claim() is not started" in done.stdout


@pytest.mark.slow
def test_a_file_without_the_fence_fails(pg_server, tmp_path):
    """``assert_current`` that checks nothing: the stale holder's writes go through."""
    shutil.copy(ROOT / "solutions" / "ch13_leases.py", tmp_path / "ch13_leases.py")
    source = (ROOT / "solutions" / "ch13_postgres.py").read_text()
    head, _, rest = source.partition("def assert_current(")
    docstring_end = rest.index('"""', rest.index('"""') + 3) + 3
    body_end = rest.index("\ndef observe(")
    gutted = rest[:docstring_end] + "\n    return None\n\n" + rest[body_end:]
    (tmp_path / "ch13_postgres.py").write_text(head + "def assert_current(" + gutted)
    done = checkpoint(tmp_path / "ch13_leases.py", pg_server)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  2 live stale holder" in done.stdout, done.stdout
