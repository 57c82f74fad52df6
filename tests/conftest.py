"""Suite-wide: the implementation options, and a guard that no test leaves a process behind."""

from __future__ import annotations

import os
import time

import pytest
from impls import IMPL_PATH, chapter_of

from lucyshop.lab.loader import ENV, ImplementationError, block_for
from lucyshop.lab.processes import descendants


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
    config.addinivalue_line(
        "markers", "slow: starts several processes (deselect with -m 'not slow')"
    )
    try:
        path = chapter_of(config.getoption("--impl") or os.environ.get(ENV) or "learner")
    except ImplementationError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[IMPL_PATH] = path
    if config.getoption("--block-reference"):
        block_for(path)


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
