"""A correct file that prints megabytes and takes its time passes: output goes to files, never
to a pipe that could fill, and the deadlines leave room for slow calls."""

from __future__ import annotations

import pytest
from sandbox_files import check, student_copy

pytestmark = pytest.mark.slow


def test_a_chatty_slow_correct_file_passes(tmp_path):
    """Megabytes of output from the checkpoint's recovery and the tests, and slow calls."""
    chatty = """

_quiet_recover_once = recover_once


@functools.wraps(_quiet_recover_once)
def recover_once(*args, **kwargs):

    for n in range(3000):
        print(f"debug {n}: " + "recovering " * 20)
        print(f"debug {n} on stderr", file=sys.stderr)
    time.sleep(0.5)
    return _quiet_recover_once(*args, **kwargs)
"""
    status, data, output = check(
        student_copy(tmp_path, "\nimport functools\nimport sys\nimport time\n" + chatty),
        tmp_path,
        "--no-measured",  # the model's exercises are not what this file changes
    )
    assert status == 0, output[-3000:]
    assert data["checkpoint"]["status"] == "PASSING", data["checkpoint"]
    assert data["summary"].startswith("16/16 functions PASSING"), data
    assert "checkpoint PASSING" in data["summary"], data
