"""Limits on a whole sandbox, not one process: its processes and its memory, in cgroups.

``RLIMIT_NPROC`` bounds a sandbox's processes wherever they run as a uid other than root: user
mode's pool uid, and, for an ordinary user, bubblewrap's own user namespace (the kernel counts
processes per user namespace, so the limit takes in the sandbox's alone). It never binds a
process whose real uid is root, mapped to another inside a namespace or not, so a sandbox root
starts would fork without end. And ``RLIMIT_AS`` bounds one process, so a sandbox's children
add up: three of 1.3 GiB ran at once. Where root may make cgroups, each sandbox gets a group
of its own in each controller that is there: ``pids.max`` (``NPROC``) and a memory limit
(``MEMORY``) on all of its processes together; the kernel ends a process of the sandbox that
would take it past its memory, never one of the trusted side. Elsewhere ``missing()`` says
which is not there, for the first line ``make check`` prints: the process count is then bounded
as above, and memory by ``RLIMIT_AS`` per process times the process count.

A group is made below the cgroup this process is in (cgroup v1's controller hierarchies, or a
cgroup v2 tree that hands the controller down), so it never escapes a limit set above us. Each
is named ``lucyshop-<pid>-<n>-<time made>`` after the process that made it, and removed once
empty: by that process when it starts another sandbox (once the group is a minute old: a
younger one may be about to be entered) or exits, or by any later one once that process is
gone.
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

CGROUPS = Path("/sys/fs/cgroup")  # v1: a hierarchy per controller below it; v2: the tree
PREFIX = "lucyshop-"
SETTLED = 60.0  # seconds after which an empty group of this process's own is done with
# What bounds one sandbox: ``pids.max`` and, in v1 and v2 files, its memory in bytes.
LIMIT_FILES = {"pids": ("pids.max", "pids.max"), "memory": ("memory.limit_in_bytes", "memory.max")}
_numbers = itertools.count()


def _own(controller: str) -> str:
    """This process's cgroup path in ``controller``'s v1 hierarchy, else its v2 path."""
    unified = "/"
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, names, path = line.split(":", 2)
            if controller in names.split(","):
                return path
            if number == "0":
                unified = path
    return unified


@functools.cache
def home(controller: str) -> tuple[Path | None, str]:
    """The directory this process may make ``controller`` groups in (``pids`` or
    ``memory``), else None and why not (no reason for an ordinary user, whose sandboxes
    ``RLIMIT_NPROC`` bounds)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None, ""
    own = _own(controller).lstrip("/")
    for root in (CGROUPS / controller, CGROUPS):
        parent = root / own
        if not (parent / "cgroup.procs").is_file():
            continue
        if root == CGROUPS:  # v2: only where the controller is handed down
            with contextlib.suppress(OSError):
                if controller not in (parent / "cgroup.subtree_control").read_text().split():
                    continue
        probe = parent / f"{PREFIX}{os.getpid()}-probe"
        try:
            probe.mkdir(exist_ok=True)
            try:
                (probe / _limit_file(probe, controller)).write_text("1000000\n")
            finally:
                probe.rmdir()
        except OSError:
            continue
        return parent, ""
    return None, f"no {controller} cgroup root may make here"


def missing() -> str:
    """Which whole-sandbox limits root's sandboxes here lack, and why; empty where they have
    both (and for an ordinary user)."""
    return "; ".join(why for why in (home("pids")[1], home("memory")[1]) if why)


def enter(command: Sequence[str], limits: dict[str, int]) -> list[str]:
    """``command`` started in new groups of its own, one for each of ``limits``'s
    controllers that ``home`` has (``{"pids": count, "memory": bytes}``): a shell moves itself
    into them, then becomes the command, so that nothing the command starts is ever outside
    them. Unchanged where there are none."""
    groups = []
    for controller, limit in limits.items():
        root, _ = home(controller)
        if root is None:
            continue
        sweep(root, settled=SETTLED)
        _sweep_at_exit(root)
        group = root / f"{PREFIX}{os.getpid()}-{next(_numbers)}-{int(time.time())}"
        group.mkdir()
        (group / _limit_file(group, controller)).write_text(f"{limit}\n")
        groups.append(str(group / "cgroup.procs"))
    if not groups:
        return list(command)
    moves = [f'echo $$ > "${number}"' for number in range(len(groups))]  # $0, $1, ...
    script = " && ".join([*moves, f"shift {len(groups) - 1}", 'exec "$@"'])
    return ["/bin/sh", "-c", script, *groups, *command]


def _limit_file(group: Path, controller: str) -> str:
    """The file of ``group`` that holds ``controller``'s limit (v1's name, else v2's)."""
    first, second = LIMIT_FILES[controller]
    return first if (group / first).exists() else second


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
