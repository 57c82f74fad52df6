"""Ending a child's process group: one way for every child started in a session of its own.

A child that runs a student's code (the check's ``OwnGroupChild``, the grader's check of one
hand-in, the sandbox's worker) leads a process group, so past its deadline it and whatever it
started that stayed in the group go with one signal. A leaf, so the grader's parent can use it
without importing the lab's process helpers.
"""

from __future__ import annotations

import os
import signal
import subprocess

KILL_WAIT_SECONDS = 5.0


def end_group(proc: subprocess.Popen, wait: float | None = KILL_WAIT_SECONDS) -> None:
    """SIGKILL the process group ``proc`` leads (started with ``start_new_session``), then reap
    ``proc``, waiting at most ``wait`` seconds (``None``: until it is reaped). Gone already is
    fine."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait(timeout=wait)
