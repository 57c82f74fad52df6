"""The learner suite catches every guard removed from the reference, in the right row.

Each mutant is one exact edit of ``solutions/ch13_leases.py`` (the edit must match exactly
once, so a change to the reference that would silently disarm a mutant fails here instead).
Each is written to a temporary file and run, with the reference blocked, through the tests of
the function its edit lands in (``spec/learner/test_<function>.py``, the module behind that
function's ``make check`` row), or of the row beyond the book its guard belongs to
(``Mutant.module``); those tests must fail. The unmutated control runs the whole suite.
``-x`` stops at the first failure, and the multi-process contention test is deselected
(``-m "not slow"``) except for the one mutant only it can catch, to keep this quick on two
cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mutants import MUTANTS

from lucyshop.lab.check.subjects import module_of

# Module fixtures run whole suites (one per mutant): past the suite's default.
pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions" / "ch13_leases.py"


CONTENTION = {mutant.name for mutant in MUTANTS if mutant.needs_contention}


def run_suite(path: Path, tests: str, *, slow: bool = False) -> subprocess.CompletedProcess:
    """``tests`` on ``path``, the reference blocked. Third-party plugins are not needed here
    and cost seconds of start-up per mutant. The run's temporary directories live beside its
    file (``--basetemp``): pytest's own clean-up of older sessions' directories would walk
    other runs' kit copies, whose ``solutions`` entries the block refuses by name."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            tests,
            "--impl",
            str(path),
            "--block-reference",
            "-x",
            "-q",
            "--color=no",
            "-m",
            "" if slow else "not slow",
            "-p",
            "pytest_timeout",
            f"--basetemp={path.parent / 'tmp'}",
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every mutant through its function's tests, and the unmutated control through the whole
    suite, two at a time."""
    directory = tmp_path_factory.mktemp("mutants")
    files = {"control": directory / "control" / "ch13_leases.py"}
    tests = {"control": "spec/learner"}
    files["control"].parent.mkdir()
    files["control"].write_text(SOLUTIONS.read_text(encoding="utf-8"), encoding="utf-8")
    for mutant in MUTANTS:
        files[mutant.name] = mutant.write(directory)
        tests[mutant.name] = f"spec/learner/{mutant.module or module_of(mutant.function)}.py"
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        futures = {
            name: pool.submit(run_suite, path, tests[name], slow=name in CONTENTION)
            for name, path in files.items()
        }
        return {name: future.result() for name, future in futures.items()}


def test_the_unmutated_copy_passes(runs):
    """The control: a copy of the reference outside solutions/ passes,
    so each failure below is the edit's."""
    result = runs["control"]
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("name", [mutant.name for mutant in MUTANTS])
def test_the_learner_suite_catches_the_mutant(runs, name):
    result = runs[name]
    summary = (result.stdout.strip().splitlines() or [""])[-1]
    assert result.returncode == 1, (
        f"the mutant survived its function's tests (exit {result.returncode}): {summary}"
    )
    assert "1 failed" in summary or "1 error" in summary, summary
    assert "ImplementationError" not in result.stdout, "the mutant must load; a test must catch it"
