"""``make bench`` in small: the side-by-side queue section runs real worker processes end to end,
and its bookkeeping (duplicates, ratios, targets) says what it must.

No speed is asserted here: the figures belong to ``make bench`` on a quiet machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from lucyshop.lab.evidence import receipts
from lucyshop.lab.loader import ROOT
from lucyshop.lab.services.processes import wait_until
from lucyshop.proof.bench import cli
from lucyshop.proof.bench.engines import peers_installed
from lucyshop.proof.bench.sections import feedback, grading, queues


@pytest.mark.slow
def test_a_short_bench_measures_every_cell_with_no_duplicate_and_no_lock_error(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["--impl", "solutions", "--only", "queues,fence", "--repeats", "1", "--seconds", "0.2"]
    argv += ["--sizes", "300"]
    argv += ["--processes", "1,2", "--rounds", "20", "--out", str(out)]
    assert cli.main(argv) == 0
    report = json.loads(out.read_text())
    assert receipts.validate(out, "bench") == []
    assert report["provenance"]["command"][1:] == ["-m", "lucyshop.proof.bench", *argv]
    measured = report["provenance"]["code"]  # a change to any of these makes the report stale
    assert {"solutions/ch13_leases.py", "src/lucyshop/store.py"} <= set(measured)
    assert "src/lucyshop/proof/bench/sections/queues.py" in measured
    rows = report["queues"]["rows"]
    kit = [r for r in rows if r["engine"] == "kit"]
    assert len(kit) == 2 * 2 * 2, "two kit cycles x two synchronous settings x two process counts"
    for row in kit:
        assert row["cycles"] > 0 and row["cycles_per_s"]["median"] > 0, row
        assert (row["duplicates"], row["lock_errors"]) == (0, 0), row
        assert row["take_p99_ms"]["median"] > 0, row
    if peers_installed():
        assert {r["engine"] for r in rows} == {"kit", "litequeue", "persist-queue"}
        assert all("vs_litequeue" in r and "vs_persist-queue" in r for r in kit)
    names = [t["name"] for t in report["targets"]]
    assert "0 duplicates and 0 lock errors in every kit cell" in names
    assert any(name.startswith("fence cost") for name in names)
    printed = capsys.readouterr().out
    assert "targets:" in printed and "claim+fin" in printed


def test_a_bench_keeps_the_make_test_section_that_make_test_time_wrote(tmp_path):
    """``make test-time`` writes its run into bench.json as ``make_test``; a later ``make bench``
    rewrites its own sections and keeps that one (it used to drop it)."""
    out = tmp_path / "bench.json"
    timed = {"seconds": 321.0, "provenance": {"command": ["make", "test"]}}
    out.write_text(json.dumps({"make_test": timed}))
    argv = ["--impl", "solutions", "--only", "fence", "--repeats", "1", "--rounds", "5"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["make_test"] == timed and "fence" in report


def records(taken_by_worker: list[list[int]], lock_errors: int = 0) -> list[dict]:
    return [
        {
            "start": 10.0,
            "last": 11.0,
            "taken": taken,
            "takes": [0.001] * len(taken),
            "lock_errors": lock_errors,
        }
        for taken in taken_by_worker
    ]


def test_an_item_taken_twice_is_counted_as_a_duplicate():
    cell = queues.cell_result(records([[1, 2, 3], [3, 4]], lock_errors=1), 300)
    assert (cell["cycles"], cell["duplicates"], cell["lock_errors"]) == (5, 1, 2)
    assert cell["cycles_per_s"] == pytest.approx(5.0)


def test_a_target_names_each_cell_that_misses_it():
    target = queues.ratio_target(
        "x >= 1.0x", [("FULL 300 1p", 1.2), ("NORMAL 300 8p", 0.8)], 1.0, "no such kind"
    )
    assert not target.held
    assert "NORMAL 300 8p 0.80x" in target.reason and "FULL 300 1p" not in target.reason
    assert queues.ratio_target("x", [("a", 1.0)], 1.0, "k").held, "at the floor is held"
    assert not queues.ratio_target("x", [("a", None)], 1.0, "k").held, "unmeasured is not held"


def test_the_feedback_and_grading_targets_hold_at_their_limits_and_not_past_them():
    """The issues' limits: a warm ``make check`` 15 s, one rerun 2.5 s, the sandbox at most 10%
    of its time; eight hand-ins 360 s, 20 CPU-s a hand-in, a class of 200 within the hour."""

    def timed(check: float, rerun: float, ratio: float) -> dict:
        spread = {"median": check}
        return {
            "make_check_s": spread,
            "rerun_s": {"median": rerun},
            "sandbox_ratio": ratio,
            "isolation": "bwrap",
            "check_cpu_s": {"median": 18.0},
            "exercise_5_alone_s": {"median": 9.2},
            "cores": 2,
            "floor_s": 9.2,
        }

    def graded(seconds: float, cpu: float, projected: float) -> dict:
        return {
            "submissions": 20,
            "seconds": seconds,
            "wall_seconds_per_student": round(seconds / 20, 1),
            "cpu_seconds_per_student": cpu,
            grading.PROJECTED: projected,
            "jobs": 3,
            "cores": 2,
        }

    assert [t.held for t in feedback.targets(timed(10.0, 2.5, 1.10))] == [True, True, True]
    assert [t.held for t in feedback.targets(timed(10.1, 2.6, 1.11))] == [False, False, False]
    assert [t.held for t in grading.targets(graded(60.0, 20.0, 3600))] == [True, True, True]
    assert [t.held for t in grading.targets(graded(60.5, 20.1, 3601))] == [False, False, False]
    line = (
        "grading: 20 submissions with their exercises and checkpoint, 3 at a time, in 100 s"
        " (5.0 s a student); 12.5 CPU-s a student, so 200 students in about 21 min on 2 cores"
    )
    assert grading.lines(graded(100.0, 12.5, 1249)) == [line]


def test_a_missed_speed_target_says_the_floor_its_own_figures_set():
    """The floor is the longer of the check's CPU-seconds over every core and exercise 5's
    measurement alone; a missed target names it and what set it, a held one says nothing."""
    assert feedback.floor(cpu=23.0, cores=2, alone=9.3) == 11.5, "the cores set it"
    assert feedback.floor(cpu=12.0, cores=4, alone=9.3) == 9.3, "the waits set it"
    result = {
        "make_check_s": {"median": 15.4},
        "rerun_s": {"median": 0.6},
        "sandbox_ratio": 1.0,
        "isolation": "bwrap",
        "check_cpu_s": {"median": 23.0},
        "exercise_5_alone_s": {"median": 9.3},
        "cores": 2,
        "floor_s": 11.5,
    }
    check = feedback.targets(result)[0]
    assert not check.held
    assert check.line().endswith(
        "-- at least 11.5 s here: the check's work is 23.0 CPU-s (11.5 s with all 2 cores"
        " busy), and exercise 5's measurement alone takes 9.3 s"
    )
    assert feedback.lines(result)[1] == f"feedback: {check.reason}"
    fast = feedback.targets(result | {"make_check_s": {"median": 9.9}})[0]
    assert fast.held and "--" not in fast.line()
    each = {
        "submissions": 20,
        "seconds": 222.0,
        "cpu_seconds_per_student": 21.0,
        grading.PROJECTED: 2100,
        "cores": 2,
    }
    missed = grading.targets(each)[0]
    assert not missed.held
    assert (
        missed.reason
        == "at least 10.5 s a student here: 21.0 CPU-s a student with all 2 cores busy"
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_while_a_class_is_graded_ends_its_checks_and_writes_nothing(tmp_path):
    """The bench grades a class in its own process: SIGTERM ends the running checks (as Ctrl-C
    does in make grade), exits 130 and leaves the receipt as it was."""
    out = tmp_path / "bench.json"
    bench = subprocess.Popen(
        [sys.executable, "-m", "lucyshop.proof.bench", "--only", "grading", "--out", str(out)],
        cwd=ROOT,
        env=os.environ | {"TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    scratch = str(tmp_path / "lucyshop-grade-")  # the graded class's, under the bench's TMPDIR

    def checks() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(scratch in part for part in proc.info["cmdline"] or ()):
                    found.append(proc)
        return found

    try:
        wait_until(lambda: len(checks()) > 2, timeout=120, what="the class's checks running")
        bench.send_signal(signal.SIGTERM)
        _, errors = bench.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
    assert bench.returncode == cli.STOPPED, errors[-2000:]
    assert "bench stopped, nothing written" in errors
    assert not out.exists()
    wait_until(lambda: not checks(), timeout=30, what="every check of the class ended")
