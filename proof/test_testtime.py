"""``python -m lucyshop.proof.testtime``: timed pytest runs, quiet and beside CPU burners,
recorded as they happened and kept side by side in one file."""

from __future__ import annotations

import json
import subprocess
import time

import psutil
import pytest
from schedule import KIT, LONGEST_FIRST

from lucyshop import IMPL_ENV
from lucyshop.lab.evidence import receipts
from lucyshop.lab.services.processes import wait_until
from lucyshop.proof import testtime

ONE_TEST = "tests/kit/test_layers.py::test_the_runtime_is_every_module_outside_the_lab"
BARE = {  # a run in the shape of earlier kits: its own host and load fields, no provenance
    "command": "LEASES_IMPL=solutions python -m pytest -q --color=no -n auto",
    "seconds": 246.5,
    "exit_status": 0,
    "summary": "1238 passed in 244.16s (0:04:04)",
    "started_utc": "2026-12-04T20:58:07+00:00",
    "cpus": 2,
    "load_average_before": [0.87, 2.12, 2.11],
    "load_average_after": [3.19, 3.15, 2.58],
    "python": "3.11.7",
    "machine": "x86_64",
}


def test_measure_times_a_run_and_keeps_its_summary():
    entry = testtime.measure([ONE_TEST], sample_every=0.2)
    assert entry["exit_status"] == 0 and entry["passed"] is True
    assert entry["summary"].startswith("1 passed in ")
    assert entry["counts"] == {"passed": 1, "failed": 0, "errors": 0}
    provenance = entry["provenance"]
    assert 0 < entry["pytest_seconds"] <= provenance["seconds"] < 600
    assert provenance["command"][1:5] == ["-m", "pytest", "-q", "--color=no"]
    assert provenance["command"][-1] == ONE_TEST and entry["environment"] == testtime.ENVIRONMENT
    assert provenance["cpu_count"] >= 1 and len(provenance["loadavg_start"]) == 3
    assert sorted(provenance["code"]) == sorted(testtime.SUITE_FILES)
    assert entry["burners"] == 0 and provenance["hostname"]
    assert entry["load_average_during"]["samples"] >= 1
    assert entry["cores"] >= 1 and entry["floor_seconds"] == round(
        entry["cpu_seconds"] / entry["cores"], 1
    )
    assert receipts.validate({"quiet": entry}, "testtime") == []


def test_the_floor_is_the_machines_cpu_over_the_run_spread_over_its_cores(monkeypatch):
    """A suite that keeps the machine busy for 7 CPU-s in a run cannot take less than 7 / cores
    seconds; a loaded run's CPU-seconds count its burners too, so it gives no floor."""
    readings = iter([100.0, 107.0])
    monkeypatch.setattr(testtime, "machine_cpu", lambda: next(readings))
    monkeypatch.setattr(testtime, "cores", lambda: 2)
    monkeypatch.setattr(
        testtime.subprocess,
        "run",
        lambda command, **_: subprocess.CompletedProcess(command, 0, "1 passed in 3.6s\n", ""),
    )
    entry = testtime.measure([ONE_TEST], sample_every=0.05)
    assert (entry["cpu_seconds"], entry["cores"], entry["floor_seconds"]) == (7.0, 2, 3.5)
    readings = iter([100.0, 107.0])
    loaded = testtime.measure([ONE_TEST], burn=1, sample_every=0.05)
    assert loaded["cpu_seconds"] == 7.0 and "floor_seconds" not in loaded


def test_burners_spin_a_core_each_for_the_block_and_are_gone_after_it():
    with testtime.burners(2) as pids:
        procs = [psutil.Process(pid) for pid in pids]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(p.cpu_times().user > 0.2 for p in procs):
            time.sleep(0.1)
        assert all(p.cpu_times().user > 0.2 for p in procs)  # each one really burns
        assert all(p.is_running() for p in procs)
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).is_running()]
    with pytest.raises(ValueError, match="0 or more"), testtime.burners(-1):
        pass


def test_burners_can_spin_at_the_lowest_priority():
    with testtime.burners(2, nice=19) as pids:
        wait_until(
            lambda: [psutil.Process(pid).nice() for pid in pids] == [19, 19],
            timeout=60,
            what="both burners at niceness 19",
        )
        assert all(psutil.Process(pid).cmdline()[-1] == testtime.BURN for pid in pids)


def test_a_loaded_run_records_its_burners_and_the_load_it_ran_under(tmp_path, monkeypatch):
    seen: list = []

    def suite_beside_burners(command, **options):
        seen.extend(
            p.pid for p in psutil.Process().children() if p.cmdline()[-1:] == [testtime.BURN]
        )
        return subprocess.CompletedProcess(command, 0, "1 passed in 0.2s\n", "")

    monkeypatch.setattr(testtime.subprocess, "run", suite_beside_burners)
    entry = testtime.measure([ONE_TEST], burn=2, sample_every=0.05)
    assert len(seen) == 2, "the suite ran beside both burners"
    assert entry["passed"] is True and entry["burners"] == 2
    during = entry["load_average_during"]
    assert during["samples"] >= 1 and during["max"] >= during["mean"] >= 0
    out = tmp_path / "test-time.json"
    assert testtime.record(out, entry) == {"loaded": entry}
    assert receipts.validate(out, "testtime") == []


def fake_suite(returncode: int, summary: str, ran: list):
    def run(command, **options):
        ran.append((command, options["env"][IMPL_ENV]))
        failed = (
            "FAILED tests/check/test_claim.py::test_one - assert 1 == 2\n" if returncode else ""
        )
        return subprocess.CompletedProcess(command, returncode, f"F.\n{failed}{summary}\n", "")

    return run


def test_the_command_writes_the_entry_and_fails_with_the_suite(tmp_path, capsys, monkeypatch):
    ran: list = []
    monkeypatch.setattr(
        testtime.subprocess, "run", fake_suite(1, "1 failed, 1 passed in 0.5s", ran)
    )
    out = tmp_path / "test-time.json"
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"schema": 1, "queues": {"kit": 1.5}}))

    assert testtime.main(["--out", str(out), "--bench", str(bench), "--", "-k", "claim"]) == 1
    entry = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == {"quiet": entry}
    assert json.loads(bench.read_text()) == {
        "schema": 1,
        "queues": {"kit": 1.5},
        "make_test": entry,
    }
    assert entry["exit_status"] == 1 and entry["passed"] is False
    assert entry["summary"] == "1 failed, 1 passed in 0.5s" and entry["pytest_seconds"] == 0.5
    assert entry["counts"] == {"passed": 1, "failed": 1, "errors": 0}
    assert entry["failures"] == ["tests/check/test_claim.py::test_one"]
    assert ran == [(testtime.pytest_command(["-k", "claim"]), "solutions")]
    assert receipts.validate(out, "testtime") == []


def test_a_loaded_run_is_kept_beside_the_quiet_one_and_not_put_in_the_bench(
    tmp_path, capsys, monkeypatch
):
    ran: list = []
    monkeypatch.setattr(testtime.subprocess, "run", fake_suite(0, "9 passed in 3.0s", ran))
    out, bench = tmp_path / "test-time.json", tmp_path / "bench.json"
    bench.write_text(json.dumps({"schema": 1}))

    assert testtime.main(["--out", str(out), "--bench", str(bench)]) == 0
    quiet = json.loads(capsys.readouterr().out)
    loading = ["--burners", "3", "--settle", "0.1"]
    assert testtime.main(["--out", str(out), "--bench", str(bench), *loading]) == 0
    loaded = json.loads(capsys.readouterr().out)
    assert loaded["burners"] == 3 and loaded["settle_seconds"] == 0.1
    assert json.loads(out.read_text()) == {"quiet": quiet, "loaded": loaded}
    assert json.loads(bench.read_text())["make_test"] == quiet  # the bench's figure is quiet
    assert receipts.validate(out, "testtime") == []

    assert testtime.main(["--out", str(out)]) == 0  # a new quiet run
    again = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == {"quiet": again, "loaded": loaded}
    assert len(ran) == 3


@pytest.mark.parametrize(
    ("data", "broken"),
    [
        ({}, "(top)"),
        (BARE, "(top)"),  # one bare run, not filed under its kind
        ({"loaded": {**BARE}}, "loaded: 'provenance' is a required"),  # an earlier kit's shape
        ({"quiet": None, "other": 1}, "quiet: None is not of type"),
    ],
)
def test_a_malformed_record_breaks_the_schema(data, broken):
    assert any(line.startswith(broken) for line in receipts.validate(data, "testtime"))


def test_a_loaded_run_needs_burners_and_a_quiet_one_none(tmp_path, monkeypatch):
    monkeypatch.setattr(testtime.subprocess, "run", fake_suite(0, "1 passed in 1.0s", []))
    entry = testtime.measure(["-k", "x"])
    assert receipts.validate({"quiet": entry}, "testtime") == []
    assert receipts.validate({"loaded": entry}, "testtime") != []
    assert receipts.validate({"quiet": {**entry, "burners": 8}}, "testtime") != []
    assert receipts.validate({"loaded": {**entry, "burners": 8}}, "testtime") == []


def test_a_run_whose_provenance_is_broken_breaks_the_schema(monkeypatch):
    monkeypatch.setattr(testtime.subprocess, "run", fake_suite(0, "1 passed in 1.0s", []))
    entry = testtime.measure(["-k", "x"])
    broken = {**entry, "provenance": {**entry["provenance"], "seconds": -1}}
    found = receipts.validate({"quiet": broken}, "testtime")
    assert any(line.startswith("quiet/provenance/seconds: -1 is less than") for line in found)
    lost = {key: value for key, value in entry.items() if key != "environment"}
    found = receipts.validate({"quiet": lost}, "testtime")
    assert any("'environment' is a required" in line for line in found)


def test_failures_are_the_ids_the_short_summary_names():
    output = (
        "tests/a.py::test_x FAILED\n"
        "FAILED tests/a.py::test_x[one-two] - AssertionError: no - really\n"
        "ERROR tests/b.py::test_y - RuntimeError\n"
        "FAILED\n"
    )
    assert testtime.failures(output) == ["tests/a.py::test_x[one-two]", "tests/b.py::test_y"]


def test_counts_read_every_word_pytest_prints():
    assert testtime.counts("3 failed, 1400 passed, 2 skipped, 1 error, 4 warnings in 300.2s") == {
        "passed": 1400,
        "failed": 3,
        "errors": 1,
        "skipped": 2,
        "warnings": 4,
    }
    assert testtime.counts("") == {"passed": 0, "failed": 0, "errors": 0}
    assert testtime.pytest_seconds("1417 passed in 438.00s (0:07:18)") == 438.0
    assert testtime.pytest_seconds("") is None


def test_every_file_scheduled_first_exists():
    """make test's workers take the files in LONGEST_FIRST first; a renamed file would quietly
    drop to the end of the queue and run alone."""
    assert [name for name in LONGEST_FIRST if not (KIT / name).is_file()] == []
