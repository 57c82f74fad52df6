"""``python -m lucyshop.lab.evidence.testtime``: one timed pytest run, reported as it happened."""

from __future__ import annotations

import json
import subprocess

from schedule import LONGEST_FIRST, TESTS

from lucyshop.lab.evidence import testtime

ONE_TEST = "tests/test_style.py::test_the_configured_limits_are_100_columns_and_complexity_12"


def test_measure_times_a_run_and_keeps_its_summary():
    entry = testtime.measure([ONE_TEST])
    assert entry["exit_status"] == 0
    assert entry["summary"].startswith("1 passed in ")
    assert 0 < entry["seconds"] < 600
    assert entry["command"].startswith("LEASES_IMPL=solutions python -m pytest -q")
    assert entry["command"].endswith(ONE_TEST)
    assert entry["cpus"] >= 1 and len(entry["load_average_before"]) == 3


def test_the_command_writes_the_entry_and_fails_with_the_suite(tmp_path, capsys, monkeypatch):
    ran = []

    def failing_suite(command, **options):
        ran.append((command, options["env"]["LEASES_IMPL"]))
        return subprocess.CompletedProcess(command, 1, "F.\n1 failed, 1 passed in 0.5s\n", "")

    monkeypatch.setattr(testtime.subprocess, "run", failing_suite)
    out = tmp_path / "test-time.json"
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"schema": 1, "queues": {"kit": 1.5}}))

    assert testtime.main(["--out", str(out), "--bench", str(bench), "--", "-k", "claim"]) == 1
    entry = json.loads(out.read_text())
    assert entry == json.loads(capsys.readouterr().out)
    assert json.loads(bench.read_text()) == {
        "schema": 1,
        "queues": {"kit": 1.5},
        "make_test": entry,
    }
    assert entry["exit_status"] == 1 and entry["summary"] == "1 failed, 1 passed in 0.5s"
    assert ran == [(testtime.pytest_command(["-k", "claim"]), "solutions")]


def test_every_file_scheduled_first_exists():
    """make test's workers take the files in LONGEST_FIRST first; a renamed file would quietly
    drop to the end of the queue and run alone."""
    assert [name for name in LONGEST_FIRST if not (TESTS / name).is_file()] == []
