"""A process-count limit for the sandboxes root starts under bubblewrap.

``RLIMIT_NPROC`` bounds a sandbox's processes wherever they run as a uid other than root: user
mode's pool uid, and, for an ordinary user, bubblewrap's own user namespace (the kernel counts
processes per user namespace, so the limit takes in the sandbox's alone). It never binds a
process whose real uid is root, mapped to another inside a namespace or not, so a sandbox root
starts would fork without end. There a pids cgroup of the sandbox's own holds the count, where
root may make one (cgroup v1's pids hierarchy, or a cgroup v2 tree that hands out the pids
controller); elsewhere ``missing()`` says why, for the first line ``make check`` prints.

Each group is named ``lucyshop-<pid>-<n>-<time made>`` after the process that made it, and
removed once empty: by that process when it starts another sandbox (once the group is a minute
old: a younger one may be about to be entered) or exits, or by any later one once that process
is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))  # cgroup v1, then v2
PREFIX = "lucyshop-"
SETTLED = 60.0  # seconds after which an empty group of this process's own is done with
_numbers = itertools.count()


@functools.cache
def home() -> tuple[Path | None, str]:
    """The cgroup directory this process may make pids groups in, else None and why not
    (no reason for an ordinary user, whose sandboxes ``RLIMIT_NPROC`` already bounds)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, ""
    for root in ROOTS:
        if not (root / "cgroup.procs").is_file():
            continue
        if root.name != "pids":  # v2: only where the pids controller is handed down
            with contextlib.suppress(OSError):
                if "pids" not in (root / "cgroup.subtree_control").read_text().split():
                    continue
        probe = root / f"{PREFIX}{os.getpid()}-probe"
        try:
            probe.mkdir(exist_ok=True)
            try:
                (probe / "pids.max").write_text("1\n")
            finally:
                probe.rmdir()
        except OSError:
            continue
        return root, ""
    return None, "no pids cgroup root may make here"


def missing() -> str:
    """Why root's sandboxes here have no process-count limit; empty where they have one (and
    for an ordinary user)."""
    return home()[1]


def enter(command: Sequence[str], limit: int) -> list[str]:
    """``command`` started in a new pids group of its own with ``limit`` processes: a shell
    moves itself into the group, then becomes the command, so that nothing the command starts
    is ever outside it. Unchanged where ``home()`` has none."""
    root, _ = home()
    if root is None:
        return list(command)
    sweep(root, settled=SETTLED)
    _sweep_at_exit(root)
    group = root / f"{PREFIX}{os.getpid()}-{next(_numbers)}-{int(time.time())}"
    group.mkdir()
    (group / "pids.max").write_text(f"{limit}\n")
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs"), *command]


@functools.cache
def _sweep_at_exit(root: Path) -> None:
    atexit.register(sweep, root)


def sweep(root: Path, settled: float = 0.0) -> None:
    """Remove the empty groups of processes that are gone, and this process's own that are
    ``settled`` seconds old (a group still holding a process cannot be removed: a later sweep
    takes it)."""
    for group in root.glob(f"{PREFIX}*-*-*"):
        parts = group.name[len(PREFIX) :].split("-")
        if len(parts) != 3 or not all(part.isdigit() for part in parts):
            continue
        owner, _, made = parts
        mine = int(owner) == os.getpid()
        if (mine and time.time() - int(made) >= settled) or (
            not mine and not psutil.pid_exists(int(owner))
        ):
            with contextlib.suppress(OSError):
                group.rmdir()
