"""The OS boundary around student code: what a sandboxed process may see, write and start.

Three ways to run untrusted code, chosen once per machine (``choice()``):

- ``bwrap``: bubblewrap (the system's, else the kit's own pinned copy: ``bubblewrap.find``)
  with every namespace unshared (its own PID namespace, so nothing it starts outlives it; no
  network but its own loopback; no IPC with the host), capabilities dropped,
  ``no_new_privs``, an empty root with only the interpreter, the kit's ``src/``, the virtual
  environment and the student's staged files read-only, a private size-limited ``/tmp``, and
  the run's scratch directory the only writable place it shares.
  ``solutions/``, ``.git``, the tests, the class directory and the other hand-ins are not in
  its view at all.
- ``user``: root where no bubblewrap can make its namespaces (a container whose seccomp
  refuses them): the process drops to an unprivileged uid, which holds only while the
  protected parts are closed to that uid; the kit closes them itself (``ready_for_user``).
- ``none``: no isolation (macOS, or an ordinary Linux user whom no bubblewrap serves):
  ``make check`` runs and says so in one line; ``make grade`` refuses to grade a class this way
  unless told ``--unisolated``.

Every mode sets resource limits (memory, one file's size, CPU seconds, open files) with
``prlimit`` before the command starts, and passes only an allow-listed environment; where root
may make cgroups, a sandbox's processes together also get a process count and a memory limit
(``host/cgroups.py``).
``LUCYSHOP_ISOLATION`` forces a mode (``none`` in particular, to see what ``make check`` does
without the sandbox).
"""

from __future__ import annotations

import compileall
import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

import lucyshop
from lucyshop.lab.loader import ROOT, STUDENT_FILES
from lucyshop.lab.sandbox.host import CannotIsolate, bubblewrap, cgroups
from lucyshop.lab.sandbox.host.uids import clear_uid, clear_unheld, hold_uid, sandbox_uid

MODE_ENV = "LUCYSHOP_ISOLATION"
MODES = ("bwrap", "user", "none")
IMPL_DIR = Path("/sandbox/impl")  # where the student's staged files appear inside the sandbox
NOBODY = 65534  # the sandbox's user inside bubblewrap's own user namespace
# Processes (threads too) one sandbox may have at once: RLIMIT_NPROC for user mode's uid and
# an ordinary user's bubblewrap namespace, a pids cgroup for root's sandboxes (``cgroups``).
NPROC = 512
# Memory of all of one sandbox's processes together, where a memory cgroup can hold it
# (``cgroups``): less than three children of 1.3 GiB, which once ran in one sandbox at once.
MEMORY = 3 * 1024**3
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
    "LUCYSHOP_CHECK",  # make check's marker, so that its sweep finds every sandboxed process
)
# The parts of the kit a sandboxed process may never read.
PROTECTED = ("solutions", "spec", "tests", "proof", ".git", "checkpoints", "evidence", "grading")


@dataclass(frozen=True)
class Choice:
    """The mode this machine gets, the bubblewrap that isolates (bwrap mode), and why no
    bubblewrap does (the other modes): the real reason, for the first line ``make check`` prints."""

    mode: str
    bwrap: bubblewrap.Bwrap | None = None
    why: str = ""


@functools.cache
def choice() -> Choice:
    """The strongest mode this machine offers (``$LUCYSHOP_ISOLATION`` overrides): bubblewrap
    (``bubblewrap.find``'s order), else, as root on Linux, an unprivileged user, else none."""
    forced = os.environ.get(MODE_ENV)
    if forced and forced not in MODES:
        raise CannotIsolate(f"{MODE_ENV}={forced!r}: use one of {', '.join(MODES)}")
    if not sys.platform.startswith("linux"):
        if forced in ("bwrap", "user"):
            raise CannotIsolate(f"{MODE_ENV}={forced}: only Linux has it")
        return Choice("none", why=f"no bubblewrap on {sys.platform}")
    if forced in ("user", "none"):
        return Choice(forced, why=f"{MODE_ENV}={forced}")
    found, reasons = bubblewrap.find()
    if found is not None:
        return Choice("bwrap", found)
    why = "; ".join(reasons)
    if forced == "bwrap":
        raise CannotIsolate(f"{MODE_ENV}=bwrap, but no bubblewrap works here: {why}")
    return Choice("user" if os.geteuid() == 0 else "none", why=why)


def isolation() -> str:
    """The mode of ``choice()``: ``bwrap``, ``user`` or ``none``."""
    return choice().mode


def describe(mode: str | None = None) -> str:
    """One line of ``make check``'s output: what isolates the student's code here. In ``user``
    mode it is also the moment the kit readies that mode (``ready_for_user``), so that the
    line can say what it changed."""
    chosen = choice()
    mode = mode or chosen.mode
    if mode == "bwrap" and chosen.bwrap is not None:
        unbounded = cgroups.missing()
        return (
            f"isolated: {chosen.bwrap.version}, {chosen.bwrap.origin}: own namespaces, a"
            " read-only kit without the reference"
            + (f"; no whole-sandbox limit for root's sandboxes ({unbounded})" if unbounded else "")
        )
    if mode == "user":
        done = ready_for_user()
        return (
            f"isolated: an unprivileged uid of its own (user mode: root, and no bubblewrap"
            f" here: {chosen.why})" + (f"; {done}" if done else "")
        )
    why = chosen.why or "bubblewrap isolates here, but this run was told not to use it"
    return f"NOT isolated ({why}): your code runs with your own rights"


def stage(impl: Path, into: Path) -> Path:
    """Copy the student's files (the chapter file and its siblings) into ``into``: the only
    student files a sandbox sees, read-only, so it can neither change nor swap them."""
    into.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(impl, into / STUDENT_FILES[0])
    for name in STUDENT_FILES[1:]:
        if (impl.parent / name).is_file():
            shutil.copyfile(impl.parent / name, into / name)
    # Read-only to everyone who may read them: in user mode, this run's own uid alone (by
    # group), since a classmate's make check runs at the same time under another uid.
    closed = isolation() == "user"
    for path in into.iterdir():
        path.chmod(0o440 if closed else 0o444)
    into.chmod(0o550 if closed else 0o555)
    if closed:
        for path in (into, *into.iterdir()):
            os.chown(path, 0, sandbox_uid())
    return into / STUDENT_FILES[0]


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, whatever ``stage`` made read-only: unlike
    ``shutil.rmtree(..., ignore_errors=True)`` alone, which as any user but root leaves each
    staged copy of the student's files behind (their directory has no write bit). Where some
    is left, each of our directories under ``path`` gets its owner's bits back through its own
    open handle (``os.fwalk`` follows no link), and the rest goes: nothing outside the tree,
    its parent included, changes. What cannot be removed even then (a directory another user
    owns, or one its owner may not list) is left, as before."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):  # the usual case (root, or nothing read-only): one walk
        return
    with contextlib.suppress(OSError):  # fwalk stats the top unguarded: it may be gone
        for _where, _dirs, _files, handle in os.fwalk(path):
            mode = os.fstat(handle)
            if mode.st_uid == os.geteuid() and mode.st_mode & stat.S_IRWXU != stat.S_IRWXU:
                os.fchmod(handle, stat.S_IMODE(mode.st_mode) | stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)


@functools.cache
def _inside_bytecode() -> None:
    """Write the bytecode of the modules a sandboxed process runs (``sandbox/inside``, most of
    which no process outside imports), once a process, where it is missing or stale: a sandbox
    may not write it, so each sandboxed process compiled them afresh (a check starts about
    seventy). Where the kit is read-only, nothing is written and they are compiled as before."""
    compileall.compile_dir(Path(__file__).with_name("inside"), maxlevels=0, quiet=2)


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
        _inside_bytecode()
        if self.mode == "user":
            uid = sandbox_uid()
            ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            return ["setpriv", *ids, "--no-new-privs", "--", *_limited(command, nproc=NPROC)]
        if self.mode != "bwrap":
            return _limited(command)
        command = _limited(command, nproc=NPROC)
        binds = ["--tmpfs", "/", *bubblewrap.PROC_MOUNT, "--dev", "/dev"]
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
        found = choice().bwrap
        if found is None:
            raise CannotIsolate(f"no bubblewrap works here: {choice().why}")
        return [str(found.path), *bubblewrap.NAMESPACES, *binds, "--", *command]

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
        if self.mode == "user":
            ready_for_user()
        # A preload (a shifted clock's libfaketime) is set by ``env`` for the last exec alone:
        # bwrap, prlimit and setpriv run as root first, and libfaketime in them would make a
        # root-owned semaphore that the unprivileged code, told its name, then cannot open.
        preload = {name: env[name] for name in ("LD_PRELOAD",) if name in env}
        if preload:
            command = ["/usr/bin/env", *(f"{k}={v}" for k, v in preload.items()), *command]
        argv = cgroups.enter(self.argv(command, shown), {"pids": NPROC, "memory": MEMORY})
        return subprocess.Popen(
            argv,
            env=self.env({k: v for k, v in env.items() if k not in preload}),
            start_new_session=True,
            **kwargs,
        )


def _limited(command: Sequence[str], nproc: int | None = None) -> list[str]:
    """``command`` under the resource limits, where ``prlimit`` exists (not on macOS).
    ``nproc``: a process count, where it counts the sandbox's processes alone (a uid of its
    own, or a user namespace of its own); never in ``none`` mode, where it would take in the
    student's other processes."""
    if shutil.which("prlimit") is None:
        return list(command)
    limits = LIMITS | ({"nproc": nproc} if nproc is not None else {})
    return ["prlimit", *(f"--{name}={value}" for name, value in limits.items()), *command]


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
        os.chown(path, sandbox_uid(), sandbox_uid())
    _searchable(path)


def clear_free_uids() -> list[int]:
    """At the end of ``make grade`` in ``user`` mode (no other mode runs code as the pool's
    uids): end what runs that had to be killed left under their uids. The pids ended."""
    return clear_unheld() if isolation() == "user" else []


def end_check() -> list[int]:
    """At the end of a ``make check`` in ``user`` mode: end what its uid left (``clear_uid``)."""
    return clear_uid(sandbox_uid()) if isolation() == "user" else []


def closed_to_others(paths: Iterable[Path]) -> list[Path]:
    """Take others' rights from ``paths`` (a class's hand-in folders, in ``user`` mode, where
    every hand-in's uid is an "other"); the ones changed."""
    changed = []
    for path in paths:
        bits = stat.S_IMODE(path.stat().st_mode)
        if bits & 0o007:
            path.chmod(bits & ~0o007)
            changed.append(path)
    return changed


def begin_check(directory: Path) -> None:
    """In ``user`` mode, as a ``make check`` starts: its own uid (``hold_uid``, never one
    handed down by whoever started it: a grader runs one per hand-in side by side), and
    ``directory`` (its temporary directory) searchable by that uid alone: mode 0710, group the
    uid's. Everything under it is then out of a classmate's reach, however its path leaks
    (another process's command line)."""
    if isolation() != "user":
        return
    os.chown(directory, 0, hold_uid())
    directory.chmod(0o710)


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
    return not _open_to_others()


def _open_to_others() -> list[Path]:
    return [
        ROOT / n for n in PROTECTED if (ROOT / n).exists() and (ROOT / n).stat().st_mode & 0o007
    ]


@functools.cache
def ready_for_user() -> str:
    """Ready ``user`` mode, once a process, and say what changed (empty when nothing did).

    The unprivileged user is the boundary only while the kit's protected parts are closed to
    others, so the kit, which owns its checkout, closes them (``chmod o-rwx``). The user must
    also reach the runtime (the interpreter, the virtual environment, ``src/``): a directory
    above them that others cannot search (Debian's ``/root``) gets the search bit, never the
    read bit, as ``share`` does for a run's own directories."""
    done = []
    closing = _open_to_others()
    for path in closing:
        try:
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o007)
        except OSError as error:
            raise CannotIsolate(
                f"cannot drop to an unprivileged user: {path} is readable by others and"
                f" could not be closed ({error.strerror}); chmod o-rwx it"
            ) from None
    if closing:
        done.append(f"closed {', '.join(p.name for p in closing)} to other users")
    opened = _searchable(Path(sys.base_prefix), Path(sys.prefix), package_root())
    if opened:
        done.append(f"let others search (o+x, not list) {', '.join(map(str, opened))}")
    return "; ".join(done)


def _searchable(*paths: Path) -> list[Path]:
    """Give every directory above ``paths`` the others' search bit, unless its group (a
    run's own directory, ``begin_check``) already lets this run's uid search it; the
    ones changed."""
    changed = []
    for path in paths:
        for above in path.resolve().parents:
            state = above.stat()
            bits = state.st_mode
            if isolation() == "user" and state.st_gid == sandbox_uid() and bits & stat.S_IXGRP:
                continue
            if not bits & stat.S_IXOTH:
                above.chmod(stat.S_IMODE(bits) | stat.S_IXOTH)
                changed.append(above)
    return changed


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
