"""Suite-wide: the implementation options, and a guard that no test leaves a process behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from impls import IMPL_PATH, chapter_of
from schedule import TESTS, rank

from lucyshop.lab.loader import ENV, ImplementationError, block_for
from lucyshop.lab.processes import descendants

SUITES = ("runtime", "learner", "exercises")  # a directory each; the modules beside them: kit


def pytest_addoption(parser: pytest.Parser) -> None:
    """Options of the learner and exercise suites (here, so both can be collected in one run)."""
    group = parser.getgroup("chapter 13")
    group.addoption(
        "--impl",
        default=None,
        help="learner, solutions or the path of a .py file (default: $LEASES_IMPL, else learner)",
    )
    group.addoption(
        "--block-reference",
        action="store_true",
        help="make solutions/ unreadable in this process, except the implementation chosen",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        path = chapter_of(config.getoption("--impl") or os.environ.get(ENV) or "learner")
    except ImplementationError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[IMPL_PATH] = path
    if config.getoption("--block-reference"):
        block_for(path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its suite (pyproject.toml lists the markers), so ``-m`` can pick;
    the longest files first."""
    for item in items:
        if item.path.is_relative_to(TESTS):
            suite = item.path.relative_to(TESTS).parts[0]
            item.add_marker(suite if suite in SUITES else "kit")

    items.sort(key=lambda item: rank(item.path))  # stable: each file's own order is kept


@pytest.fixture(autouse=True)
def no_leftover_processes():
    before = descendants(os.getpid())
    yield
    deadline = time.monotonic() + 5
    left = descendants(os.getpid()) - before
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = descendants(os.getpid()) - before
    assert not left, f"the test left processes running: {sorted(left)}"


@pytest.fixture(scope="session")
def demo_run() -> subprocess.CompletedProcess:
    """``make demo``, once a session: the checkpoint against the reference (every case, its
    evidence written to ``lucyshop.lab.demo.EVIDENCE``), then the recovered shop's report.
    Shared by every test that only reads what it printed or recorded."""
    return subprocess.run(
        [sys.executable, "-m", "lucyshop.lab.demo"],
        check=False,
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="session")
def reference_checkpoint(demo_run) -> tuple[subprocess.CompletedProcess, dict]:
    """The demo's checkpoint run against the reference and the evidence it recorded."""
    from lucyshop.lab.demo import EVIDENCE  # here: every pytest start-up would pay for it

    return demo_run, json.loads(EVIDENCE.read_text())
