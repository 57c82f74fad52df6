"""The judge suite: ``make check`` is right about a student's file, in both directions.

Each scenario is a real file (a copy of the reference answers with one change appended, or a
small file of its own) checked the way a student's is. The whole-check runs are slow (real
checkpoint processes, a 30 s test deadline), so each runs once per session and every test
that only reads its result shares it.
"""

from __future__ import annotations

import pytest
from judge_files import check, student_copy


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A whole check takes minutes (and a session fixture's run counts against its first
    test): past the suite's 120 s default, up to the check's own 900 s deadline."""
    for item in items:
        if "judge" in item.path.parts and item.get_closest_marker("timeout") is None:
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


@pytest.fixture(scope="session")
def broken_run(tmp_path_factory):
    """One file with three faults: ``claim`` never returns, ``percentile`` raises SystemExit(0),
    ``fenced`` ends its process with ``os._exit(0)``. Everything else is the reference."""
    directory = tmp_path_factory.mktemp("broken")
    return check(student_copy(directory, BROKEN), directory)
