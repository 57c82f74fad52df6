"""What ``make check`` does around the student's code: bounded children, the kit kept intact.

- ``OwnGroupChild``: a process started in its own session with its output drained to a file (never a
  pipe, so no amount of output can block it, and a grandchild holding the descriptor cannot
  hold the check open), tagged with this check's marker in its environment.
- ``sweep``: end every process that carries the marker, however it detached (``setsid``,
  double fork), so nothing a student's file starts outlives the check.
- ``Limits``: how long each part of a check may take; ``DISK_LIMIT``: what its sandboxes may
  write to their scratch.
- ``KitFiles``: the kit's own files (spec, tests, checkpoints, src, solutions, Makefile,
  pyproject.toml) read before the check; afterwards anything changed, deleted or added is
  named. The student's code runs in a sandbox that cannot write them
  (``lucyshop.lab.sandbox``), so nothing is put back: a change is someone's edit.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from lucyshop import validate
from lucyshop.lab.services.groups import end_group
from lucyshop.lab.services.limits import (
    CASE_SECONDS,
    CHECKPOINT_SECONDS,
    LOAD_SECONDS,
    SUITE_SECONDS,
    TEST_SECONDS,
)

MARKER = "LUCYSHOP_CHECK"
TAIL_BYTES = 8000
WATCHED = ("spec", "tests", "checkpoints", "src", "solutions")
WATCHED_FILES = ("Makefile", "pyproject.toml")
GIT_SECONDS = 10.0
SKIPPED_PARTS = ("__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".hypothesis")
DISK_LIMIT = 256 * 1024 * 1024  # what one check's sandboxes may write to their scratch


@dataclass(frozen=True)
class Limits:
    """How long each part of one check may take, in seconds.

    The defaults are ``make check``'s. A rubric (``[limits]``) may change them for a class, and
    the kit's own tests shorten them so that a hang costs seconds, not minutes.
    """

    test: float = TEST_SECONDS  # one learner or exercise test (a measurement's: 120 s)
    case: float = CASE_SECONDS  # one checkpoint case
    load: float = LOAD_SECONDS  # importing the file once, before anything runs
    suite: float = SUITE_SECONDS  # the whole suite, reruns included
    checkpoint: float = CHECKPOINT_SECONDS  # the whole checkpoint

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            validate.seconds(value, f"the {name} limit", positive=True)

    def argv(self) -> list[str]:
        """The same limits as ``python -m lucyshop.lab.check`` options (the defaults left out)."""
        return [
            f"--{name}-timeout={value:g}"
            for name, value in asdict(self).items()
            if value != getattr(Limits, name)
        ]


DEFAULT_LIMITS = Limits()  # make check's own


def new_marker() -> str:
    return uuid.uuid4().hex


class OwnGroupChild:
    """One bounded child in a session, and so a process group, of its own; its output in
    ``log``, the check's marker in its environment.

    Its own group because it runs a student's code: ``kill`` ends it and whatever it started
    that stayed in its group with one ``killpg``, which never signals the check itself; what
    left the group (``setsid``, a double fork) is ``sweep``'s, by marker. The kit's own
    helpers make the opposite choice (``services.processes.SharedGroupChildren``).
    """

    def __init__(
        self, argv: Sequence[str], *, cwd: Path, env: dict[str, str], log: Path, marker: str
    ) -> None:
        self.log = log
        self.started = time.monotonic()
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env | {MARKER: marker},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def poll(self) -> int | None:
        return self.proc.poll()

    def kill(self) -> None:
        """End the child's whole session group, then reap the child."""
        end_group(self.proc, None)

    def tail(self, limit: int = TAIL_BYTES) -> list[str]:
        """The last lines it wrote (at most ``limit`` bytes)."""
        try:
            with open(self.log, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - limit))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        lines = text.splitlines()
        return lines[1:] if len(text) >= limit and len(lines) > 1 else lines


def kit_changes(root: Path) -> list[str]:
    """The kit's files (never a student's) that differ from the commit, by git: a test or
    checkpoint edited by accident changes what every check says. Empty outside a git checkout
    or where git cannot answer within seconds."""
    paths = [*WATCHED, *WATCHED_FILES]
    command = ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--"]
    try:
        found = subprocess.run(
            [*command, *paths], capture_output=True, text=True, timeout=GIT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if found.returncode != 0:
        return []
    return sorted(line[3:] for line in found.stdout.splitlines() if len(line) > 3)


def disk_usage(root: Path) -> int:
    """Bytes the files under ``root`` occupy on disk (links not followed, a vanishing file
    skipped): what a check's sandboxes have written to their scratch."""
    total = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_blocks * 512
            except OSError:
                continue
    return total


def sweep(marker: str) -> list[int]:
    """Kill every process whose environment carries ``marker``; return their pids. The
    processes killed are waited on as found (a pid looked up again may already be gone)."""
    killed = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARKER) == marker:
                proc.kill()
                killed.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    psutil.wait_procs(killed, timeout=5)
    return [proc.pid for proc in killed]


class KitFiles:
    """A byte-for-byte copy of the kit's own files, to compare and restore after a check."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = self._read()

    def _paths(self) -> list[Path]:
        paths = [self.root / name for name in WATCHED_FILES if (self.root / name).is_file()]
        for name in WATCHED:
            for path in (self.root / name).rglob("*"):
                parts = path.relative_to(self.root).parts
                if path.is_file() and not any(
                    p in SKIPPED_PARTS or p.endswith(".egg-info") for p in parts
                ):
                    paths.append(path)
        return paths

    def _read(self) -> dict[Path, bytes]:
        return {path: path.read_bytes() for path in self._paths()}

    def changed(self) -> list[str]:
        """What changed or went, and any added files, by their paths relative to the kit's
        root ("(added)" after a file that was not there before). Nothing is written back: a
        file changed under a running check is someone's edit, never the sandboxed code's."""
        changed = []
        for path, data in self.files.items():
            try:
                same = path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                changed.append(str(path.relative_to(self.root)))
        added = set(self._paths()) - set(self.files)
        return sorted(changed) + sorted(f"{path.relative_to(self.root)} (added)" for path in added)
