"""Whether a pid runs: the kit's one liveness test. ``lucy status`` asks it of each worker, the
lab of its children. A leaf of its own, so that a lab process that watches its children does
not import the status screen (its supplier client and HTTP) to ask it."""

from __future__ import annotations

import psutil

GONE = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)  # exited: a pid in these states runs no code


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine now (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() not in GONE
    except (psutil.NoSuchProcess, ValueError, OverflowError):
        return False
    except psutil.AccessDenied:
        return True  # it exists, under another user
