"""Bounded process helpers: every wait has a deadline, and nothing we start is left running.

The checkpoint and the experiment start real processes (workers, suppliers) and must never hang
on one that died, stopped or ignores signals. So: a ready file is written atomically and waited
for with a deadline that also notices the process exiting first, and ``SharedGroupChildren``
ends whatever it started when its ``with`` block ends, however it ends.

A child that runs a student's code is started in a process group of its own instead (the
check's ``OwnGroupChild``, the grader's check of one hand-in, the sandbox's worker), and all
three end it the one way, ``services.groups.end_group``: the whole group past its deadline.

Questions about other processes (is it alive, is it stopped, what did it start, which ones
mention a marker) go through psutil, so they read the same on Linux and macOS.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Self, TypeVar

import psutil

from lucyshop.atomic import (
    read_regular,
    write_ready,  # noqa: F401  (re-exported: the lab's callers use it here)
)
from lucyshop.pids import GONE
from lucyshop.validate import seconds

T = TypeVar("T")

POLL_SECONDS = 0.02
TERM_GRACE_SECONDS = 2.0
KILL_WAIT_SECONDS = 5.0
STDERR_TAIL_BYTES = 2000
MAX_READY_BYTES = 4 * 1024 * 1024


def _read_json(path: Path) -> dict[str, Any] | None:
    """The file's JSON object, or None while it is absent or not yet complete.

    Read only as a regular file of at most ``MAX_READY_BYTES``, never through a link and never
    blocking on a FIFO: a ready file may sit in a directory another process can write."""
    try:
        raw = read_regular(path, MAX_READY_BYTES)
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise TypeError(f"ready file {error}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        raise TypeError(f"ready file {path} holds JSON that is not an object: {data!r}")
    return data


def _stderr_tail(proc: subprocess.Popen[Any]) -> str:
    """The last part of what an exited process wrote to stderr, if it went to a pipe or a file.

    A pipe is read without blocking (a grandchild may still hold it open); a file is known when
    ``SharedGroupChildren.spawn`` recorded its name as ``proc.stderr_log``.
    """
    data = b""
    if proc.stderr is not None:
        fd = proc.stderr.fileno()
        os.set_blocking(fd, False)
        try:
            while chunk := os.read(fd, 65536):
                data = (data + chunk)[-STDERR_TAIL_BYTES:]
        except BlockingIOError:
            pass
    elif (log := getattr(proc, "stderr_log", None)) is not None:
        try:
            with open(log, "rb") as handle:
                handle.seek(max(0, os.path.getsize(log) - STDERR_TAIL_BYTES))
                data = handle.read()
        except OSError:
            return ""
    return data.decode("utf-8", "replace").strip()


def wait_for_file(
    path: str | os.PathLike[str], *, timeout: float, proc: subprocess.Popen[Any] | None = None
) -> dict[str, Any]:
    """Poll until ``path`` holds a JSON object and return it.

    Raises RuntimeError (with the exit status and the tail of stderr) when ``proc`` exits before
    writing it, and TimeoutError naming the path when the deadline passes first.
    """
    target = Path(path)

    def written() -> tuple[dict[str, Any]] | None:  # a tuple, so that even ``{}`` is found
        running = proc is None or proc.poll() is None  # asked before reading: a child that
        if (data := _read_json(target)) is not None:  # wrote and then exited is not missed
            return (data,)
        if running or proc is None:
            return None
        tail = _stderr_tail(proc)
        said = f"; its stderr ends:\n{tail}" if tail else ""
        raise RuntimeError(
            f"process {proc.pid} exited with status {proc.returncode} "
            f"before writing its ready file {target}{said}"
        )

    return wait_until(written, timeout=timeout, what=f"the ready file {target}")[0]


def wait_until(
    predicate: Callable[[], T], *, timeout: float, interval: float = POLL_SECONDS, what: str
) -> T:
    """Return the first truthy value of ``predicate()``, asked every ``interval`` seconds."""
    deadline = time.monotonic() + seconds(timeout, "a timeout")
    seconds(interval, "a polling interval", positive=True)
    while True:
        if value := predicate():
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"gave up: waited {timeout:.2f}s for {what}")
        time.sleep(min(interval, remaining))


def wait_exit(proc: subprocess.Popen[Any], *, timeout: float) -> int:
    """The process's exit status, or TimeoutError if it is still running at the deadline."""
    try:
        return proc.wait(timeout=seconds(timeout, "a timeout"))
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"process {proc.pid} still running: waited {timeout:.2f}s") from None


class SharedGroupChildren:
    """Owns the processes it spawns, all in the parent's process group, and ends every one
    still alive when the block ends.

    Ending is SIGCONT (a stopped process cannot act on SIGTERM), SIGTERM, up to 2 s of grace,
    then SIGKILL and a bounded wait, and it happens on success, on an exception and on
    KeyboardInterrupt alike. The children read no terminal input (stdin is /dev/null) but share
    the parent's process group on purpose: they are the kit's own workers and suppliers, so a
    Ctrl-C or a kill of the group reaches them too, rather than leaving them running unnoticed
    in a session of their own. (``lab.check.guard.OwnGroupChild`` makes the opposite choice,
    for a student's code that must be ended as a group without signalling ``make check``.)
    """

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[Any]] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        survivors = self._end([p for p in self._procs if p.poll() is None])
        for proc in self._procs:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        self._procs.clear()
        if survivors and exc_type is None:
            raise RuntimeError(f"processes {survivors} survived SIGKILL for {KILL_WAIT_SECONDS}s")

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stdout: int | IO[Any] | None = None,
        stderr: int | IO[Any] | None = None,
    ) -> subprocess.Popen[Any]:
        """Start ``argv``; if stderr goes to a named file, remember it so failures can quote it."""
        proc = subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
        )
        if isinstance(name := getattr(stderr, "name", None), str):
            proc.stderr_log = name  # type: ignore[attr-defined]
        self._procs.append(proc)
        return proc

    def end(self, proc: subprocess.Popen[Any]) -> int:
        """End one child now (if it is still running) and return its exit status."""
        if proc.poll() is None and self._end([proc]):
            raise RuntimeError(f"process {proc.pid} survived SIGKILL for {KILL_WAIT_SECONDS}s")
        return proc.returncode

    def _end(self, procs: list[subprocess.Popen[Any]]) -> list[int]:
        """Signal all at once, so the grace periods overlap; return the pids still alive."""
        for sig in (signal.SIGCONT, signal.SIGTERM):
            for proc in procs:
                proc.send_signal(sig)
        try:
            alive = _wait_all(procs, TERM_GRACE_SECONDS)
        except KeyboardInterrupt:  # a second Ctrl-C cuts the grace short, not the cleanup
            for proc in procs:
                proc.kill()
            _wait_all(procs, KILL_WAIT_SECONDS)
            raise
        for proc in alive:
            proc.kill()
        return [proc.pid for proc in _wait_all(alive, KILL_WAIT_SECONDS)]


def _wait_all(procs: list[subprocess.Popen[Any]], seconds: float) -> list[subprocess.Popen[Any]]:
    """Wait up to ``seconds`` in all for the processes to exit; return those that did not."""
    deadline = time.monotonic() + seconds
    alive = list(procs)
    while alive:
        alive = [proc for proc in alive if proc.poll() is None]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS / 2)
    return alive


def end_children_on_sigterm() -> None:
    """From now on SIGTERM raises SystemExit(143) here, so that every ``with
    SharedGroupChildren()`` block ends its children on the way out: by default a ``kill`` of
    this process alone would leave them running, orphaned. (Call it from the main thread of a
    command line.)"""
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def python_argv(module: str, *args: str, blocked: bool = True) -> list[str]:
    """The command that runs ``python -m module``, by default with the reference solutions
    blocked."""
    if blocked:
        return [sys.executable, "-m", "lucyshop.lab.blocked", module, *args]
    return [sys.executable, "-m", module, *args]


# ------------------------------------------------------------------ other processes, portably

# Whether a pid runs is lucyshop.pids.pid_alive, which the runtime's ``lucy status``
# also asks: one definition of "alive" (a zombie is gone) for the shop and the lab.


def is_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (SIGSTOP, SIGTSTP) and not yet continued: the
    kit's one test of a paused process (the checkpoint's paused holder asks it of each pid)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def descendants(pid: int) -> set[int]:
    """The pids of every live process below ``pid`` (zombies excluded: a wait reaps them)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    found = set()
    for child in children:
        try:
            if child.status() not in GONE:
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def processes_mentioning(marker: str) -> list[str]:
    """``"pid: command line"`` of every live process but this one whose command line holds
    ``marker`` (a run's own temporary directory, say)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        info = proc.info
        if info["pid"] == os.getpid() or info["status"] in GONE or not info["cmdline"]:
            continue
        cmdline = " ".join(info["cmdline"])
        if marker in cmdline:
            found.append(f"{info['pid']}: {cmdline}")
    return found
