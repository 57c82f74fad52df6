"""Running a command inside the image: its whole filesystem, a PID and mount namespace of its own.

``in_image`` enters the unpacked image through ``enter-image.sh`` (``pivot_root``, as a
container has it) under ``unshare``, copies its output to a log and to the screen line by
line, samples the process tree's resident size, and at the deadline kills the namespace's
first process, which takes every process inside with it: nothing started in the image
outlives the call. Apart from the proof's steps so that the tests can run a command in a real
image without the rest of the proof.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from lucyshop.lab.grade.gradescope import autograder
from lucyshop.proof.gradescope.quota import Quota

ENTER = autograder.TEMPLATES / "enter-image.sh"
SAMPLE_SECONDS = 0.2  # between looks at the process tree's resident size
KILL_WAIT = 10.0


@dataclass
class Ran:
    command: list[str]
    exit_status: int | None  # None: stopped at the deadline
    seconds: float
    peak_tree_rss_bytes: int
    peak_processes: int
    log: Path


def in_image(
    root: Path,
    command: Sequence[str],
    *,
    timeout: float,
    log: Path,
    binds: Sequence[tuple[Path, str]] = (),
    quota: Quota | None = None,
) -> Ran:
    """Run ``command`` in the image ``root`` (its whole filesystem, in a PID and mount namespace
    of its own: ``enter-image.sh``) for at most ``timeout`` seconds; its output goes to ``log``
    and, line by line, to stdout."""
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private"]
    argv += ["--", "bash", str(ENTER), str(root), *(f"{host}:{inside}" for host, inside in binds)]
    argv += ["--", *command]
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=quota.join if quota and quota.groups else None,  # noqa: PLW1509
    )
    peak = _Peak(child.pid)
    with log.open("wb") as sink:
        copier = threading.Thread(target=_copy, args=(child.stdout, sink), daemon=True)
        copier.start()
        peak.start()
        try:
            status: int | None = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
            os.killpg(child.pid, signal.SIGKILL)  # the namespace's first process: all go
            child.wait(timeout=KILL_WAIT)
        finally:
            peak.stop()
            copier.join(timeout=KILL_WAIT)
    seconds = time.monotonic() - started
    return Ran(list(command), status, seconds, peak.rss, peak.processes, log)


def _copy(stream: IO[bytes], sink: IO[bytes]) -> None:
    for line in iter(stream.readline, b""):
        sink.write(line)
        sys.stdout.write("  | " + line.decode("utf-8", "replace"))
        sys.stdout.flush()


class _Peak(threading.Thread):
    """The largest summed resident size of a process and its descendants, sampled."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.rss, self.processes = pid, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            try:
                top = psutil.Process(self.pid)
                tree = [top, *top.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for process in tree:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.rss, self.processes = max(self.rss, total), max(self.processes, len(tree))

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=KILL_WAIT)
