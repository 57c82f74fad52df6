"""No test leaves a process behind: a pytest plugin, loaded by ``tests/conftest.py``'s
``pytest_plugins`` for every suite. ``make check``'s pytest children block it by name
(``lucyshop.lab.check.suites.LEFTOVER_GUARD``): there it could only blame the kit's fixtures,
which this suite holds to it, since a student's processes live in sandboxes it leaves out.

The session's sandboxed workers are owned by their fixture, and a worker restarted after a
hang is the same worker, so they are left out.
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

from lucyshop.lab.sandbox.remote import sandbox_pids
from lucyshop.lab.services.processes import descendants

SETTLE_SECONDS = 5.0  # for a process already told to end to go
POLL = 0.05


class _Below:
    """The processes below this one when the last test ended: the next test's "before", unless
    a fixture was set up since (a module's or the session's server, started before the next
    test's guard), or none has ended yet. One scan of the machine's processes a test instead
    of three: on a busy machine each scan costs milliseconds, and make test runs thousands."""

    pids: set[int] | None = None


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    if fixturedef.argname != "no_leftover_processes":
        _Below.pids = None
    return (yield)


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """The processes below this one after the test, less those before it and the sandboxes'."""
    before = descendants(os.getpid()) if _Below.pids is None else _Below.pids
    yield
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        now = descendants(os.getpid())
        left = now - before
        if left:  # the sandboxes' own are asked for only when something is new
            left -= sandbox_pids()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(POLL)
    _Below.pids = now
    assert not left, f"the test left processes running: {described(left)}"


def described(pids: set[int]) -> list[str]:
    """``pid: command line`` of each process, as far as it can still be read."""
    found = []
    for pid in sorted(pids):
        try:
            found.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:200]}")
        except psutil.Error:
            found.append(f"{pid}: (gone)")
    return found
