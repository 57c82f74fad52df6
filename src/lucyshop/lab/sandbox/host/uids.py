"""User mode's pool of uids: each run that starts sandboxes (a ``make check``, one hand-in of
``make grade``, a test) runs them as a uid of its own.

No account needs to exist for a uid. A slot is held by a lock for the run's life, and its number
is handed to the run's children in ``UID_ENV``, so that no two runs going on at once can read,
write or signal each other's files and processes, and what a killed run left under its uid is
found by uid (code can scrub its environment) and ended by the next holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import stat
import time
from pathlib import Path
from typing import IO

import psutil

from lucyshop.lab.sandbox.host import CannotIsolate

UID_FIRST, UID_SLOTS = 2_000_000_000, 64
UID_ENV = "LUCYSHOP_SANDBOX_UID"
UID_LOCKS = Path("/run/lucyshop-sandbox-uids")
LEFT_IN = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))  # where a sandbox may leave files
CLEAR_SECONDS = 30.0


def sandbox_uid() -> int:
    """The uid this run's sandboxes run as (``user`` mode): the one handed down by the
    process that started this one, else a slot of the pool taken now (``hold_uid``)."""
    handed = os.environ.get(UID_ENV, "")
    if handed.isdigit() and UID_FIRST <= int(handed) < UID_FIRST + UID_SLOTS:
        return int(handed)
    return hold_uid()


_held: dict[int, IO[str]] = {}  # the uid this process holds, and its lock, for its whole life


def hold_uid() -> int:
    """This process's own uid of the pool, taken on the first call (after ending whatever an
    earlier holder left under it: ``clear_uid``, for a run its grader had to kill), and
    handed to the processes it starts in ``UID_ENV``. One a process: a pytest worker that runs
    many sandboxed tests, one after another, does not use up the pool."""
    if _held:
        uid = next(iter(_held))
        os.environ[UID_ENV] = str(uid)
        return uid
    UID_LOCKS.mkdir(mode=0o700, exist_ok=True)
    state = UID_LOCKS.lstat()
    if not stat.S_ISDIR(state.st_mode) or state.st_uid != 0 or state.st_mode & 0o022:
        raise CannotIsolate(f"{UID_LOCKS} is not root's own directory: remove it")
    for slot in range(UID_SLOTS):
        handle = open(UID_LOCKS / f"{slot}.lock", "a")  # noqa: SIM115 - held while we live
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        uid = UID_FIRST + slot
        clear_uid(uid)
        _held[uid] = handle
        os.environ[UID_ENV] = str(uid)
        return uid
    raise CannotIsolate(f"all {UID_SLOTS} sandbox uids are held by runs going on now")


def clear_unheld() -> list[int]:
    """End what is left under every uid of the pool that no run holds now (a run its
    grader had to kill cannot clear its own). The pids ended."""
    if not UID_LOCKS.is_dir():
        return []
    ended = []
    for slot in range(UID_SLOTS):
        with contextlib.suppress(OSError), open(UID_LOCKS / f"{slot}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ended += clear_uid(UID_FIRST + slot)
    return ended


def clear_uid(uid: int) -> list[int]:
    """End every process of ``uid`` and delete what it left in the shared temporary places
    (``LEFT_IN``): found by uid, not by marker, since code can scrub its environment. A
    process that forks while it is being ended is met by the next round: rounds go on until
    one finds nothing (within ``CLEAR_SECONDS``). The pids ended."""
    ended: list[psutil.Process] = []
    deadline = time.monotonic() + CLEAR_SECONDS
    while time.monotonic() < deadline:
        found = []
        for proc in psutil.process_iter(["uids", "status"]):
            try:
                if proc.info["status"] == psutil.STATUS_ZOMBIE:  # dead: its parent reaps it
                    continue
                if uid in (proc.info["uids"].real, proc.info["uids"].effective):
                    proc.send_signal(signal.SIGSTOP)  # no more forks from it while we go on
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, TypeError, AttributeError):
                continue
        if not found:
            break
        for proc in found:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(found, timeout=5)
        ended += found
    for place in LEFT_IN:
        with contextlib.suppress(OSError):
            for entry in place.iterdir():
                with contextlib.suppress(OSError):
                    if entry.lstat().st_uid != uid:
                        continue
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink()
    return [proc.pid for proc in ended]
