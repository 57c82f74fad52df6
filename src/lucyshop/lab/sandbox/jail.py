"""The OS boundary around student code: what a sandboxed process may see, write and start.

Three ways to run untrusted code, chosen once per machine (``isolation()``):

- ``bwrap``: bubblewrap with every namespace unshared (its own PID namespace, so nothing it
  starts outlives it; no network but its own loopback; no IPC with the host), capabilities
  dropped, ``no_new_privs``, an empty root with only the interpreter, the kit's ``src/``, the
  virtual environment and the student's staged files read-only, a private size-limited
  ``/tmp``, and the check's scratch directory the only writable place it shares.
  ``solutions/``, ``.git``, the tests, the class directory and the other hand-ins are not in
  its view at all.
- ``user``: root without user namespaces (a Gradescope container): the process drops to an
  unprivileged uid, which works only when the protected parts are closed to that uid
  (``protected_paths_closed``); otherwise nothing runs.
- ``none``: no isolation (macOS, or Linux without bubblewrap): the check runs and says so in
  one line; ``make grade`` refuses to grade a class this way unless told ``--unisolated``.

Every mode sets resource limits (memory, one file's size, CPU seconds, open files) with
``prlimit`` before the command starts, and passes only an allow-listed environment.
``LUCYSHOP_ISOLATION`` forces a mode (``none`` in particular, to see what a check does
without the sandbox).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

import lucyshop
from lucyshop.lab.loader import ROOT

MODE_ENV = "LUCYSHOP_ISOLATION"
MODES = ("bwrap", "user", "none")
IMPL_DIR = Path("/sandbox/impl")  # where the student's staged files appear inside the sandbox
STUDENT_FILES = ("ch13_leases.py", "exercises.py", "ch13_postgres.py")
NOBODY = 65534
PROC_MOUNT = ("--proc", "/proc")  # bubblewrap mounts the sandbox's own, Linux only; read by none
TMP_BYTES = 256 * 1024 * 1024  # the sandbox's private /tmp
# Per process, soft and hard (prlimit's names): address space, one file's size, CPU seconds,
# open descriptors, core dumps.
LIMITS = {"as": 4 * 1024**3, "fsize": 128 * 1024**2, "cpu": 900, "nofile": 256, "core": 0}
# What a sandboxed process may inherit from the environment; everything else (tokens, keys,
# the instructor's paths) stays outside.
ALLOWED_ENV = (
    "LANG",
    "LC_ALL",
    "TZ",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "PYTHONHASHSEED",
    "LUCYSHOP_CHECK",  # the check's marker, so that its sweep finds every sandboxed process
)
# The parts of the kit a sandboxed process may never read.
PROTECTED = ("solutions", "tests", ".git", "checkpoints", "evidence", "grading")


class CannotIsolate(RuntimeError):
    """The chosen isolation is not available here (one line says why)."""


@functools.cache
def isolation() -> str:
    """The strongest mode this machine offers (``$LUCYSHOP_ISOLATION`` overrides)."""
    forced = os.environ.get(MODE_ENV)
    if forced:
        if forced not in MODES:
            raise CannotIsolate(f"{MODE_ENV}={forced!r}: use one of {', '.join(MODES)}")
        return forced
    if sys.platform.startswith("linux") and _bwrap_works():
        return "bwrap"
    if sys.platform.startswith("linux") and os.geteuid() == 0:
        return "user"
    return "none"


def _bwrap_works() -> bool:
    binary = shutil.which("bwrap")
    if binary is None:
        return False
    probe = [binary, *_namespaces(), "--ro-bind", "/", "/", *PROC_MOUNT, "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _namespaces() -> list[str]:
    return ["--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]


def describe(mode: str | None = None) -> str:
    """One line for the check's output: what isolates the student's code here."""
    mode = mode or isolation()
    if mode == "bwrap":
        return "isolated: bubblewrap (own namespaces, read-only kit without the reference)"
    if mode == "user":
        return f"isolated: unprivileged user {NOBODY} (root without user namespaces)"
    return "NOT isolated: no bubblewrap here; your code runs with your own rights"


def stage(impl: Path, into: Path) -> Path:
    """Copy the student's files (the chapter file and its siblings) into ``into``: the only
    student files a sandbox sees, read-only, so it can neither change nor swap them."""
    into.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(impl, into / STUDENT_FILES[0])
    for name in STUDENT_FILES[1:]:
        if (impl.parent / name).is_file():
            shutil.copyfile(impl.parent / name, into / name)
    for path in into.iterdir():
        path.chmod(0o444)
    into.chmod(0o555)
    return into / STUDENT_FILES[0]


@dataclass(frozen=True)
class Jail:
    """How to start one sandboxed process: the staged files, the writable scratch, the mode."""

    staged: Path  # the directory stage() filled; it appears as IMPL_DIR inside
    scratch: tuple[Path, ...]  # shared read-write, at the same paths inside and out
    mode: str = field(default_factory=isolation)

    def inside(self, path: Path) -> Path:
        """Where a staged student file is seen from inside the sandbox."""
        if self.mode != "bwrap":
            return path
        return IMPL_DIR / path.relative_to(self.staged)

    def argv(self, command: Sequence[str], shown: Sequence[tuple[Path, Path]] = ()) -> list[str]:
        """``command`` (a ``python ...`` argv) wrapped so that it runs inside the sandbox,
        under the limits (``prlimit``) and, in ``user`` mode, as the unprivileged user;
        ``shown`` are (directory, where it appears) pairs bound read-only (bubblewrap only)."""
        command = _limited(command)
        if self.mode == "user":
            ids = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
            return ["setpriv", *ids, "--no-new-privs", "--", *command]
        if self.mode != "bwrap":
            return command
        binds = ["--tmpfs", "/", *PROC_MOUNT, "--dev", "/dev"]
        binds += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
        # The kit's own directory, empty but for what is bound into it, and read-only once
        # bound: without this, a kit under /tmp would sit in the writable private /tmp.
        binds += ["--tmpfs", str(ROOT)]
        for path in _system_paths():
            binds += ["--ro-bind", str(path), str(path)]
        binds += ["--ro-bind", str(self.staged), str(IMPL_DIR)]
        for path in self.scratch:
            binds += ["--bind", str(path), str(path)]
        for outside, inside in shown:  # more the trusted side shows, read-only (a relay's socket)
            binds += ["--ro-bind", str(outside), str(inside)]
        binds += ["--remount-ro", str(ROOT), "--remount-ro", "/", "--chdir", "/tmp"]
        binds += ["--cap-drop", "ALL"]
        binds += ["--uid", str(NOBODY)]
        binds += ["--gid", str(NOBODY), "--hostname", "sandbox"]
        return ["bwrap", *_namespaces(), *binds, "--", *command]

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        """The allow-listed environment, plus what the kit itself hands in."""
        home = "/tmp" if self.mode == "bwrap" else str(self.scratch[0])
        base = {name: os.environ[name] for name in ALLOWED_ENV if name in os.environ}
        base |= {
            "PATH": "/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(package_root()),
        }
        return base | extra

    def shows(self, outside: Path, inside: Path) -> Path:
        """Where a directory shown with ``argv``'s ``shown`` is seen from inside: ``inside``
        under bubblewrap, else where it is (the other modes have no view of their own)."""
        return inside if self.mode == "bwrap" else outside

    def popen(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str],
        shown: Sequence[tuple[Path, Path]] = (),
        **kwargs,
    ) -> subprocess.Popen:
        """Start ``command`` in the sandbox (its own session: the caller ends it as a group);
        ``shown`` as in ``argv``."""
        if self.mode == "user" and not protected_paths_closed():
            raise CannotIsolate(
                "cannot drop to an unprivileged user: the kit's protected parts"
                f" ({', '.join(PROTECTED)}) are readable by others (chmod o-rwx them)"
            )
        # A preload (a shifted clock's libfaketime) is set by ``env`` for the last exec alone:
        # bwrap, prlimit and setpriv run as root first, and libfaketime in them would make a
        # root-owned semaphore that the unprivileged code, told its name, then cannot open.
        preload = {name: env[name] for name in ("LD_PRELOAD",) if name in env}
        if preload:
            command = ["/usr/bin/env", *(f"{k}={v}" for k, v in preload.items()), *command]
        return subprocess.Popen(
            self.argv(command, shown),
            env=self.env({k: v for k, v in env.items() if k not in preload}),
            start_new_session=True,
            **kwargs,
        )


def _limited(command: Sequence[str]) -> list[str]:
    """``command`` under the resource limits, where ``prlimit`` exists (not on macOS)."""
    if shutil.which("prlimit") is None:
        return list(command)
    return ["prlimit", *(f"--{name}={value}" for name, value in LIMITS.items()), *command]


def _system_paths() -> list[Path]:
    """What Python needs to run: the system libraries, the interpreter's prefix, the virtual
    environment and the kit's ``src/`` (the runtime the student's file imports)."""
    paths = [Path(p) for p in ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache")]
    paths += [Path(sys.base_prefix).resolve(), Path(sys.prefix), package_root()]
    found: list[Path] = []
    for path in paths:
        if path.exists() and path not in found:
            found.append(path)
    return found


def share(path: Path, mode: str, *, writable: bool = True) -> None:
    """In ``user`` mode, hand ``path`` (a directory) to the unprivileged user (or, not
    ``writable``, only let it read it) and open the way to it: every directory above gets the
    others' search bit, never their read bit, so nothing can be listed. Other modes share by
    binding or not at all."""
    if mode != "user":
        return
    if writable:
        os.chown(path, NOBODY, NOBODY)
    for above in path.resolve().parents:
        mode_bits = above.stat().st_mode
        if not mode_bits & stat.S_IXOTH:
            above.chmod(stat.S_IMODE(mode_bits) | stat.S_IXOTH)


def package_root() -> Path:
    """The directory ``lucyshop`` is imported from (``src/`` of an editable install, or
    wherever an autograder put it): bound read-only and put on the sandbox's ``PYTHONPATH``.
    Never a directory that also holds the reference."""
    root = Path(lucyshop.__file__).resolve().parents[1]
    if (root / "solutions").exists():
        raise CannotIsolate(f"lucyshop is imported from {root}, which also holds solutions/")
    return root


def protected_paths_closed() -> bool:
    """True when no part of the kit a student may not read is open to other users."""
    for name in PROTECTED:
        path = ROOT / name
        if path.exists() and path.stat().st_mode & 0o007:
            return False
    return True


def inside_pids(proc: subprocess.Popen) -> set[int]:
    """The host's pids of what runs in the sandbox ``proc`` started (bubblewrap's own two
    processes left out: a signal to them would not reach the code)."""
    found = set()
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return found
    for member in family:
        try:
            if member.name() != "bwrap" and member.status() != psutil.STATUS_ZOMBIE:
                found.add(member.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def signal_inside(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to every process of the sandbox (SIGSTOP pauses the code itself)."""
    for pid in inside_pids(proc):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
