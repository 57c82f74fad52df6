"""The chaos soak: a short run passes every invariant, and a run against a mutant fails one by name.

``make soak`` runs two minutes; here a 20-second run with a fixed seed proves the harness and
the reference together, and short runs against the reference with the fence taken out of
``finish`` (or ``observe``) prove the soak can fail (a soak that cannot fail proves nothing).
Neither depends on chaos finding a stale writer in time: ``--stale`` scripts one at each
boundary named (a turn stopped there until another generation has taken its work over), and
every wait of the harness is for an event, so a loaded machine makes the runs longer, never
their findings different.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mutants import BY_NAME

from lucyshop.lab.services.processes import processes_mentioning

ROOT = Path(__file__).resolve().parents[2]
INVARIANTS = (
    "every assignment finished exactly once, with exactly one outcome row",
    "the supplier ledger holds one order per accepted operation and none the shop does not know",
    "spent cents equal the accepted amounts; reserved cents equal what is still uncertain",
    "no transcript row or outcome was written by a superseded generation",
    "every stale write was refused by the fence",
    "each claim advanced the lease generation by exactly one",
)


SOAK_TIMEOUT = 600  # far past any run here (the script itself gives up 300 s past --seconds)
SCRIPTED = ("transcript", "propose", "supplier", "completion")


def soak(
    tmp: Path, *args: str, timeout: float = SOAK_TIMEOUT
) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run the soak as its own process, its run directory under ``tmp``;
    return it and its JSON report."""
    report = tmp / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "lucyshop.proof.soak", *args, "--report", str(report)],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=os.environ | {"TMPDIR": str(tmp)},
    )
    return result, json.loads(report.read_text()) if report.exists() else None


def no_process_left(tmp: Path) -> None:
    deadline = time.monotonic() + 5
    while (left := processes_mentioning(str(tmp))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"the soak left processes running: {left}"


@pytest.fixture(scope="module")
def short_soak(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak")
    stale = [word for boundary in SCRIPTED for word in ("--stale", boundary)]
    result, report = soak(
        tmp, "--impl", "solutions", "--seconds", "20", "--seed", "13", "--items", "60", *stale
    )
    return tmp, result, report


@pytest.mark.timeout(SOAK_TIMEOUT + 60)
def test_short_soak_passes_every_invariant(short_soak):
    tmp, result, report = short_soak
    assert result.returncode == 0, result.stdout + result.stderr
    assert report is not None and report["passed"] is True
    assert [v["invariant"] for v in report["findings"]] == list(INVARIANTS)
    assert all(v["ok"] for v in report["findings"])
    lines = result.stdout.splitlines()
    assert [line.split("  ")[0] for line in lines if line[:4] in ("PASS", "FAIL")] == [
        "PASSING"
    ] * len(INVARIANTS)
    assert "soak passed" in result.stdout
    no_process_left(tmp)


@pytest.mark.timeout(SOAK_TIMEOUT + 60)
def test_short_soak_really_killed_paused_and_refused(short_soak):
    _, result, report = short_soak
    assert report["kills"] > 0 and report["pauses"] > 0 and report["resumes"] == report["pauses"]
    assert (
        report["kills"] - report["workers"] <= report["restarts"] <= report["kills"]
    )  # a restart may be due at the end
    # one stale write scripted at each boundary, each refused: takeovers and refusals for certain
    assert [(row["boundary"], row["outcome"]) for row in report["scripted"]] == [
        (boundary, "refused") for boundary in SCRIPTED
    ]
    assert all(row["superseded_by"] > row["generation"] for row in report["scripted"])
    assert report["takeovers"] >= len(SCRIPTED)
    assert report["stale_writes_refused"] >= len(SCRIPTED)
    # one order per assignment, each once; only what the drain found unstarted has none
    assert report["orders"] + report["assignments_without_order"] == report["items"] == 60
    assert report["uncertain_left"] == 0 and report["reserved_cents"] == 0
    # the printed report carries the same figures and a command that reruns exactly this run
    assert re.search(rf"kills {report['kills']}, pauses {report['pauses']}\b", result.stdout)
    assert f"stale writes refused {report['stale_writes_refused']} " in result.stdout
    assert (
        "rerun: python -m lucyshop.proof.soak --seconds 20 --seed 13 --impl solutions"
        in result.stdout
    )


@pytest.mark.timeout(SOAK_TIMEOUT + 60)
@pytest.mark.parametrize(
    ("mutant", "boundary", "row"),
    [("finish_fence", "completion", "outcome"), ("observe_fence", "transcript", "transcript")],
)
def test_soak_fails_the_reference_without_the_fence(tmp_path, mutant, boundary, row):
    """The stale write is scripted, not hoped for: the mutant's accepted write is named by the
    invariant it breaks, with its work id, however slow the machine."""
    impl = BY_NAME[mutant].write(tmp_path)
    result, report = soak(
        tmp_path,
        *("--seconds", "2", "--seed", "2", "--items", "12", "--impl", str(impl)),
        *("--stale", boundary),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert report is not None and report["passed"] is False
    [scripted] = report["scripted"]
    assert (scripted["boundary"], scripted["outcome"]) == (boundary, "accepted")
    assert scripted["superseded_by"] > scripted["generation"]
    work = scripted["work_id"]
    failed = {v["invariant"]: v for v in report["findings"] if not v["ok"]}
    refused, superseded = INVARIANTS[4], INVARIANTS[3]
    assert work in failed[refused]["work_ids"], failed
    assert "writes accepted from a claim already superseded" in failed[refused]["detail"]
    assert work in failed[superseded]["work_ids"], failed
    assert f"the {row} of work " in failed[superseded]["detail"]
    printed = [line for line in result.stdout.splitlines() if line.startswith("FAILING  ")]
    assert any(line.startswith(f"FAILING  {refused}: ") and "work ids" in line for line in printed)
    assert "soak FAILED: " in result.stdout and "kept for inspection: " in result.stdout
    no_process_left(tmp_path)


def test_soak_of_the_stubs_says_not_started(tmp_path):
    result, report = soak(tmp_path, "--seconds", "5", "--impl", "learner")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "NOT STARTED" in result.stdout and report is None
    no_process_left(tmp_path)
