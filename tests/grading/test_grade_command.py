"""``make grade`` and its defaults: every option passed through, JOBS of cores + 1 (the
Makefile's and the command's). The speed figures are ``proof/test_grade_speed.py``'s."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from lucyshop.lab.grade.__main__ import parser
from lucyshop.lab.grade.classroom import default_jobs
from lucyshop.lab.loader import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def make_grade(*assignments: str, env: dict[str, str] | None = None) -> list[str]:
    """The command ``make grade`` would run (``make -n``), as argv."""
    done = subprocess.run(
        ["make", "-s", "-n", "-o", ".venv/.model", "grade", "SUBMISSIONS=hand ins", *assignments],
        cwd=ROOT,
        env=(env or os.environ) | {"MAKEFLAGS": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    line = [x for x in done.stdout.splitlines() if "lucyshop.lab.grade" in x][-1]
    return shlex.split(line)


def test_make_grade_passes_every_option_through():
    argv = make_grade(
        "NO_CHECKPOINT=1",
        "TIMEOUT=120",
        "RUBRIC=my rubric.toml",
        "OUT=out dir",
        "FORCE=1",
        "ARCHIVE=old",
        "ROSTER=roster.csv",
        "BOM=1",
        "JOBS=7",
        "GRADE_ARGS=--no-progress --assignment X",
    )
    assert argv[argv.index("-m") + 1 :] == [
        "lucyshop.lab.grade",
        "hand ins",
        "--jobs",
        "7",
        "--no-checkpoint",
        "--timeout",
        "120",
        "--rubric",
        "my rubric.toml",
        "--out",
        "out dir",
        "--force",
        "--archive",
        "old",
        "--roster",
        "roster.csv",
        "--bom",
        "--no-progress",
        "--assignment",
        "X",
    ]
    parser().parse_args(argv[argv.index("-m") + 2 :])  # every one is an option the command takes


def test_jobs_default_to_cores_plus_one_and_the_environment_names_no_option():
    env = {k: v for k, v in os.environ.items() if k != "JOBS"} | {"OUT": "/elsewhere", "BOM": "1"}
    argv = make_grade(env=env)
    assert argv[argv.index("--jobs") + 1] == str(len(os.sched_getaffinity(0)) + 1)
    assert "--out" not in argv and "--bom" not in argv
    assert default_jobs() == len(os.sched_getaffinity(0)) + 1
    assert parser().parse_args(["x"]).jobs == default_jobs()
