"""Section ``feedback``: how long a student waits for ``make check`` and for one printed rerun.

Both are timed here (``timings``) on the solutions, each as the whole process a student starts:
``make check IMPL=solutions`` in a warm environment, measured exercises included (exercises 5
and 6 run on the scripted stand-in, so no model is involved), and the first rerun command a
FAILING row would print. The same check, interleaved, with the student's code unisolated
(``LUCYSHOP_ISOLATION=none``) gives what the sandbox costs, as a ratio from one run.

Beside each check, two figures say how fast it could be on this machine (``floor_s``): the
machine's CPU-seconds over the check (its work, spread over every core at best) and exercise
5's measurement alone (mostly waits on scripted turns and leases, which no core count
shortens). A check cannot end before either.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lucyshop.lab.check import suites
from lucyshop.lab.check.engine import children_env
from lucyshop.lab.check.guard import OwnGroupChild, new_marker, sweep
from lucyshop.lab.check.subjects import SUITES
from lucyshop.lab.loader import ROOT, impl_path
from lucyshop.lab.sandbox import jail
from lucyshop.lab.sandbox.jail import isolation
from lucyshop.lab.services.groups import end_group
from lucyshop.lab.services.limits import LOAD_SECONDS
from lucyshop.proof.bench.stats import Target, spread
from lucyshop.proof.machine import cores, machine_cpu

NAME = "feedback"
CHECK_LIMIT = 10.0  # seconds for a warm make check IMPL=solutions, the whole command (issue 46)
CHECK_DEADLINE = 300.0  # seconds before a make check that hangs is ended
RERUN_LIMIT = 2.5  # seconds for one printed rerun command
SANDBOX_LIMIT = 1.10  # a sandboxed make check against the same check unisolated (issue 28)
EXERCISE_5 = f"{SUITES[1]}/test_exercise_5.py"  # the measurement that waits longest in a check


def measure(options: argparse.Namespace) -> dict[str, Any]:
    runs, bare, alone = [], [], []
    for _ in range(options.repeats):  # interleaved, so a change of load hits both alike
        runs.append(timings(options.impl))
        with isolated_as("none"):
            bare.append(timings(options.impl)["check_seconds"])
        alone.append(exercise_5_alone(options.impl))
    checks = [run["check_seconds"] for run in runs]
    cpu = [run["check_cpu_seconds"] for run in runs]
    return {
        "make_check_s": spread(checks),
        "rerun_s": spread([run["rerun_seconds"] for run in runs]),
        "unisolated_check_s": spread(bare),
        "isolation": isolation(),
        "sandbox_ratio": round(statistics.median(checks) / statistics.median(bare), 3),
        "check_cpu_s": spread(cpu),
        "exercise_5_alone_s": spread(alone),
        "cores": cores(),
        "floor_s": floor(statistics.median(cpu), cores(), statistics.median(alone)),
    }


def floor(cpu: float, cores: int, alone: float) -> float:
    """The least a check can take here: its CPU-seconds with every core busy, or exercise 5's
    measurement alone, whichever is longer."""
    return round(max(cpu / max(cores, 1), alone), 2)


def exercise_5_alone(spec: str) -> float:
    """Seconds for exercise 5's measurement in a pytest child of the check's own, nothing
    beside it: how long it waits with the cores to itself."""
    path = impl_path(spec)
    marker = new_marker()
    with tempfile.TemporaryDirectory(prefix="lucyshop-bench-ex5-") as tmp:
        start = time.monotonic()
        jail.begin_check(Path(tmp))
        try:
            ran = suites.run_suites(path, children_env(path), Path(tmp), marker, [EXERCISE_5])
        finally:
            sweep(marker)
            jail.end_check()
        seconds = time.monotonic() - start
    failed = [nodeid for nodeid, row in ran.results.items() if row.get("outcome") != "passed"]
    if ran.problem or ran.stopped or failed or not ran.results:
        raise RuntimeError(f"exercise 5 alone did not pass: {ran.problem or ran.stopped or failed}")
    return round(seconds, 2)


def timings(spec: str) -> dict[str, float]:
    """Seconds for one whole ``make check IMPL=spec``, as the process a student starts, and
    for one printed rerun."""
    start, cpu = time.monotonic(), machine_cpu()
    make = subprocess.Popen(
        ["make", "--no-print-directory", "-s", "check", f"IMPL={spec}"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # no check marker here: the check sweeps what carries its own
    )
    try:
        _, errors = make.communicate(timeout=CHECK_DEADLINE)
    except subprocess.TimeoutExpired:
        end_group(make)
        raise RuntimeError(f"make check IMPL={spec} ran past {CHECK_DEADLINE:g} s") from None
    whole, cpu = time.monotonic() - start, machine_cpu() - cpu
    if make.returncode != 0:  # a time is only a time of the work done
        raise RuntimeError(f"make check IMPL={spec} ended with {make.returncode}: {errors[-2000:]}")
    nodeid = f"{SUITES[0]}/test_claim.py::test_oldest_first"
    argv = [sys.executable, "-m", "pytest", nodeid, "--impl", spec, "-q", "-p", "pytest_timeout"]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        child = OwnGroupChild(
            argv,
            cwd=ROOT,
            env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            log=Path(tmp) / "rerun.log",
            marker=new_marker(),
        )
        suites.wait(child, LOAD_SECONDS)
    return {
        "check_seconds": round(whole, 2),
        "check_cpu_seconds": round(cpu, 2),  # the machine's: run the bench on a quiet one
        "rerun_seconds": round(time.monotonic() - start, 2),
    }


@contextlib.contextmanager
def isolated_as(mode: str) -> Iterator[None]:
    """Checks in this block (and their children) run with isolation ``mode``."""
    saved = os.environ.get(jail.MODE_ENV)
    os.environ[jail.MODE_ENV] = mode
    jail.choice.cache_clear()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(jail.MODE_ENV, None)
        else:
            os.environ[jail.MODE_ENV] = saved
        jail.choice.cache_clear()


def lines(result: dict[str, Any]) -> list[str]:
    check, rerun = result["make_check_s"]["median"], result["rerun_s"]["median"]
    ratio = result.get("sandbox_ratio")
    sandbox = f"; the sandbox ({result.get('isolation')}) costs {ratio:.2f}x" if ratio else ""
    line = f"feedback: make check on the solutions {check:.1f} s warm, one rerun {rerun:.2f} s"
    return [line + sandbox, f"feedback: {why_not_faster(result)}"]


def why_not_faster(result: dict[str, Any]) -> str:
    """The check's floor on this machine, and what sets it."""
    cpu, cores = result["check_cpu_s"]["median"], result["cores"]
    return (
        f"at least {result['floor_s']:.1f} s here: the check's work is {cpu:.1f} CPU-s"
        f" ({cpu / max(cores, 1):.1f} s with all {cores} cores busy), and exercise 5's"
        f" measurement alone takes {result['exercise_5_alone_s']['median']:.1f} s"
    )


def targets(result: dict[str, Any]) -> list[Target]:
    check, rerun = result["make_check_s"]["median"], result["rerun_s"]["median"]
    return [
        Target(
            f"warm make check <= {CHECK_LIMIT:g} s",
            check <= CHECK_LIMIT,
            f"{check:.1f} s",
            why_not_faster(result),
        ),
        Target(f"one rerun <= {RERUN_LIMIT:g} s", rerun <= RERUN_LIMIT, f"{rerun:.2f} s"),
        Target(
            f"the sandbox adds <= {SANDBOX_LIMIT - 1:.0%} to make check",
            result["sandbox_ratio"] <= SANDBOX_LIMIT,
            f"{result['sandbox_ratio']:.2f}x ({result['isolation']})",
        ),
    ]
