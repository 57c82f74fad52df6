"""The sandbox and hostile-file suite: ``make check`` is right about a student's file, in both
directions.

Each scenario is a real file (a copy of the reference answers with one change appended, or a
small file of its own) run through ``make check`` as a student's is. Those whole runs are slow
(real checkpoint processes, a 30 s test deadline), so each runs once per session and every test
that only reads its result shares it.
"""

from __future__ import annotations

import pytest
from sandbox_files import check, student_copy


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A whole ``make check`` run takes minutes (and a session fixture's run counts against its
    first test): past the suite's default, up to that run's own 900 s deadline."""
    for item in items:
        if "sandbox" in item.path.parts and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(900))


BROKEN = """

def claim(*args, **kwargs):
    import time

    while True:
        time.sleep(1)


def percentile(values, q):
    raise SystemExit(0)


def fenced(writer_generation, current_generation):
    import os

    os._exit(0)
"""


# The hang tests' deadlines: shorter than make check's 30 s and 60 s, so that each hang costs
# seconds, and long enough for every test and case of the reference on a loaded machine.
TEST_SECONDS, CASE_SECONDS = 8, 20


@pytest.fixture(scope="session")
def broken_run(tmp_path_factory):
    """One file with three faults: ``claim`` never returns, ``percentile`` raises SystemExit(0),
    ``fenced`` ends its process with ``os._exit(0)``. Everything else is the reference."""
    directory = tmp_path_factory.mktemp("broken")
    deadlines = (f"--test-timeout={TEST_SECONDS}", f"--case-timeout={CASE_SECONDS}")
    # Without the model's exercises: their workers are children that a hung claim() holds
    # until the experiment's own 30 s wait, and no test here reads their rows.
    return check(student_copy(directory, BROKEN), directory, "--no-measured", *deadlines)
