"""The trusted side of a sandboxed worker: start it, call the student's functions, judge.

``Sandbox(impl, scratch=[...])`` stages the student's files, starts one worker in the jail
(``jail.py``) and hands out ``module()``: a stand-in for the student's module whose
functions run in the worker. Values cross by value (``wire.py``): a dataclass the student
returns arrives as a frozen dataclass of the same name and fields built here (its other
attributes, a property such as ``Claim.worker_id``, are asked of the worker); an object that
cannot travel (a connection, a queue) stays in the worker and is reached by a handle; an
object of ours that cannot travel (a supplier client) stays here and the worker calls back
only the names its kind offers (``callbacks.py``). An exception is rebuilt here from its
type's name: the kit's and the standard library's own types from a fixed list, anything else
as a ``StudentError``. Nothing from the worker is unpickled, imported or executed.

Every call has one deadline (``until``) for all it sends and reads, callbacks included. A
worker that runs past it is killed (its whole sandbox with it) and the call raises
``CallTimedOut`` naming the function; a worker that exits, sends a bad frame, answers with
another request's number or writes when no request was asked raises ``WorkerDied``. Either
way that worker is never read again, and the next ``load`` starts a fresh one.

Here is the worker's lifecycle and the conversation with it; what a failure becomes is
``errors.py``, and the stand-ins a test holds (``Remote``, ``Mirror``) are ``handles.py``.
"""

from __future__ import annotations

import dataclasses
import keyword
import os
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lucyshop.lab.sandbox import callbacks, errors, jail, wire
from lucyshop.lab.sandbox.errors import CallTimedOut, WorkerDied
from lucyshop.lab.sandbox.handles import Mirror, Remote, remote_attribute
from lucyshop.lab.services.groups import end_group
from lucyshop.lab.services.processes import descendants

MAX_FIELDS = 64  # a dataclass from the sandbox with more is refused, not built
MAX_CLASSES = 256  # distinct dataclasses built for one worker (each is a class made here)
START_TIMEOUT = 120.0  # the worker's first answer (a loaded machine starts Python slowly)
FOREVER = 3600.0
LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()  # this process's workers, for sandbox_pids


def sandbox_pids() -> set[int]:
    """Every process of this process's live sandboxes: started on purpose, ended by their
    owners (a suite-wide search for leftover processes leaves them out)."""
    return set().union(*(box.pids() for box in list(LIVE)))


class Sandbox:
    """One sandboxed worker for one student's files; restarted after a hang or a death."""

    def __init__(
        self,
        impl: Path,
        *,
        scratch: Iterable[Path],
        workdir: Path,
        shown: str | None = None,
        mode: str | None = None,
        binds: Iterable[tuple[Path, Path]] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        """``binds``: (directory, where it appears) pairs the worker is shown read-only (a
        relay's socket); ``env``: more environment for it (a shifted clock's preload)."""
        self.impl = impl
        self.shown = shown or str(impl)
        self.binds = tuple((Path(a), Path(b)) for a, b in binds)
        self.extra_env = dict(env or {})
        self.workdir = workdir
        self.scratch = tuple(Path(p).resolve() for p in scratch)
        jail.stage(impl, workdir / "staged")
        self.jail = jail.Jail(
            workdir / "staged", self.scratch + (workdir / "run",), mode or jail.isolation()
        )
        (workdir / "run").mkdir(exist_ok=True)
        jail.share(workdir / "staged", self.jail.mode, writable=False)
        for path in (workdir / "run", *self.scratch):
            self.share(path)
        self.log = workdir / "run" / "worker.log"
        self.proc = None
        self.channel: socket.socket | None = None
        self.until, self.budget = time.monotonic() + FOREVER, FOREVER
        self.hung: set[str] = set()
        self.answered = ""  # the function whose call was answered last (blamed for a late write)
        self.trusted: dict[int, Any] = {}
        self._known = errors.known()
        self._mirrors: dict[tuple, type] = {}
        self.codec = wire.Codec(self._handle_of, self._object_of, self._data_of)
        self.values_only = wire.Codec(_no_handle, _no_object, self._data_of)

    def share(self, path: Path) -> None:
        """Let the sandbox use ``path``, a directory the trusted side made: in ``user`` mode the
        unprivileged user must own it and reach it (every directory above gets o+x, never
        o+r); bubblewrap's mount namespace needs nothing."""
        jail.share(Path(path), self.jail.mode)

    # ------------------------------------------------------------ the process

    def pids(self) -> set[int]:
        """The worker's processes as this machine numbers them (the sandbox's and below)."""
        if not self.alive():
            return set()
        return {self.proc.pid} | descendants(self.proc.pid)

    def start(self) -> None:
        here, there = socket.socketpair()
        command = [sys.executable, "-m", "lucyshop.lab.sandbox.inside.worker", str(there.fileno())]
        command.append(str(self.log))
        with open(self.workdir / "sandbox.log", "ab") as out:  # out of the sandbox's reach
            self.proc = self.jail.popen(
                command,
                env=self.extra_env,
                shown=self.binds,
                pass_fds=(there.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        there.close()
        self.channel = here
        LIVE.add(self)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """End the worker and everything in its sandbox."""
        if self.proc is not None:
            end_group(self.proc, None)
            self.proc = None
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.trusted.clear()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ calls

    def load(self, name: str = jail.STUDENT_FILES[0], *, seconds: float | None = None) -> Remote:
        """The student's file ``name`` freshly executed in the worker (started if need be)."""
        if not self.alive():
            self.stop()
            self.start()
        if seconds is not None:
            self.until, self.budget = time.monotonic() + seconds, seconds
        self.trusted.clear()
        path = self.jail.inside(self.jail.staged / name)
        limit = max(self._left(), START_TIMEOUT)
        module = self.request({"op": "load", "path": str(path)}, f"importing {name}", limit)
        if not isinstance(module, str):
            raise WorkerDied(f"importing {name}", None)
        return Remote(self, wire.handle("module", 0, module), module)

    def kit(self, name: str) -> Remote:
        """One of the kit's own modules in the worker (``worker.KIT``), for fault injection."""
        module = self.request({"op": "kit", "name": name}, f"importing {name}", START_TIMEOUT)
        return Remote(self, wire.handle("module", 0, module), module)

    def _left(self) -> float:
        return max(0.0, self.until - time.monotonic())

    def request(self, message: dict[str, Any], what: str, limit: float | None = None) -> Any:
        """Send one request and wait for its answer, serving the worker's callbacks."""
        told = self.budget if limit is None else limit  # what a timeout says it had
        limit = self._left() if limit is None else limit
        function = what.split(" ")[-1]
        if self.channel is None:
            raise WorkerDied(function, None)
        deadline = time.monotonic() + max(limit, 0.001)
        number = secrets.randbits(62)  # its answer must carry it; the worker cannot guess it
        try:
            if wire.pending(self.channel):  # bytes no request asked for: never read them
                self.stop()
                late = self.answered or function
                said = f"its worker wrote after {late}() was answered, when nothing was asked"
                raise WorkerDied(late, None, said)
            wire.send(self.channel, message | {"id": number}, deadline)
            while True:
                reply = wire.receive(self.channel, deadline)
                if reply["op"] != "callback":
                    break
                self._callback(reply, deadline)
        except TimeoutError:
            self.stop()
            raise CallTimedOut(function, told) from None
        except wire.BadFrame as error:
            self.stop()
            raise WorkerDied(function, None, f"its worker sent a frame refused: {error}") from None
        except (wire.ChannelClosed, OSError):
            status = self._ended()
            raise WorkerDied(function, status, self._last_word()) from None
        if reply.get("id") != number:
            self.stop()
            raise WorkerDied(function, None, "its worker answered a request not asked")
        self.answered = function
        if reply["op"] == "value":
            try:
                return self.codec.decode(reply["value"])
            except wire.BadFrame as error:
                self.stop()
                raise WorkerDied(function, None, f"its answer was refused: {error}") from None
        if reply["op"] == "error":
            raise errors.rebuilt(reply.get("error"), known=self._known, shown=self.shown)
        self.stop()
        raise WorkerDied(what.split(" ")[-1], None)

    def _last_word(self) -> str:
        """The last line the sandbox itself wrote before the worker took over its output (the
        jail's or Python's own error, if it never started), at most 300 characters."""
        try:
            lines = (self.workdir / "sandbox.log").read_bytes()[-2000:].splitlines()
        except OSError:
            return ""
        text = next((line for line in reversed(lines) if line.strip()), b"")
        return text.decode("utf-8", "replace").strip()[:300]

    def _ended(self) -> int | None:
        """The worker's exit status once it is gone (it is killed if it lingers)."""
        status = None
        if self.proc is not None:
            try:
                status = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        self.stop()
        return status

    def _callback(self, message: dict[str, Any], deadline: float) -> None:
        """Run what the worker asks of an object we handed it: read a value, call a method,
        call it, iterate it. Only the names its kind offers (``callbacks.offered``), with
        arguments and an answer by value only (a handle either way is refused), so the worker
        reaches nothing but those calls of the objects a test handed in."""
        try:
            target = self.codec.decode(message["target"])
            if not any(target is value for value in self.trusted.values()):
                raise PermissionError("the sandbox may call back only what it was handed")
            name = callbacks.check(target, message.get("name"))
            if "args" not in message:  # a question: is ``name`` a method, or a value to send?
                found = getattr(target, name)
                value = ("method", None) if callable(found) else ("value", found)
            elif name == "__iter__":
                value = list(target)
            else:
                args = self.values_only.decode(message["args"])
                kwargs = self.values_only.decode(message["kwargs"])
                function = target if name == "__call__" else getattr(target, name)
                value = function(*args, **kwargs)
            answer = {"op": "value", "value": self.values_only.encode(value)}
        except Exception as error:  # noqa: BLE001 (it goes back to the worker as its error)
            answer = {"op": "error", "error": wire.describe(error)}
        try:
            wire.send(self.channel, answer, deadline)
        except wire.BadFrame as error:  # our own answer is too large: say so, blame no worker
            said = f"the trusted side's answer to {str(message.get('name'))[:40]} is too large"
            refused = {"module": "builtins", "type": "MemoryError", "message": f"{said}: {error}"}
            wire.send(self.channel, {"op": "error", "error": refused | {"attrs": {}}}, deadline)

    # ------------------------------------------------------------ values

    def _handle_of(self, value: Any) -> dict:
        if isinstance(value, Remote):
            return {"$handle": value._handle["$handle"]}
        twin = getattr(value, "remote", None) if getattr(type(value), "paired", False) else None
        if isinstance(twin, Remote):  # a Mirror (or a PostgreSQL one): the worker's own
            return {"$handle": twin._handle["$handle"]}
        if isinstance(value, (sqlite3.Connection, sqlite3.Cursor, type, type(sys))):
            raise TypeError(f"a {type(value).__name__} of the trusted side cannot be handed in")
        callbacks.offered(value)  # TypeError for a kind the sandbox may not call back
        number = len(self.trusted) + 1
        self.trusted[number] = value
        return wire.handle("trusted", number, type(value).__name__)

    def _object_of(self, body: list) -> Any:
        side, number, name = body
        if side == "trusted":
            if number not in self.trusted:
                raise wire.BadFrame(f"no trusted object {number}")
            return self.trusted[number]
        return Remote(self, {"$handle": body}, name.rpartition(".")[2])

    def _data_of(self, module: str, name: str, fields: dict[str, Any]) -> Any:
        """A dataclass from the sandbox, as a frozen dataclass of ours with the same fields."""
        if len(fields) > MAX_FIELDS or not all(
            f.isidentifier() and not keyword.iskeyword(f) and not f.startswith("_") for f in fields
        ):
            raise wire.BadFrame(f"a dataclass {name[:60]} whose fields are not plain names")
        key = (module, name, tuple(fields))
        if key not in self._mirrors and len(self._mirrors) >= MAX_CLASSES:
            raise wire.BadFrame(f"more than {MAX_CLASSES} kinds of dataclass from one worker")
        if key not in self._mirrors:
            short = name.rpartition(".")[2]
            cls = dataclasses.make_dataclass(
                short if short.isidentifier() else "Data",
                list(fields),
                frozen=True,
                namespace={"__getattr__": remote_attribute, "_sandbox": self},
            )
            cls.__module__, cls.__qualname__ = module, name
            self._mirrors[key] = cls
        return self._mirrors[key](**fields)

    def mirror(self, remote: Remote, path: Path) -> Mirror:
        """Our own connection to the shop file at ``path`` (the path the test chose), paired
        with the worker's connection ``remote``: passing it to a student's function hands
        the worker its own connection; reading it reads the file, never the student's
        answer about the file."""
        path = confined_file(path, self.scratch)
        db = sqlite3.connect(path, factory=Mirror, isolation_level=None, timeout=5)
        db.row_factory = sqlite3.Row
        db.remote = remote
        return db


def _no_handle(value: Any) -> dict:
    raise PermissionError(f"a {type(value).__name__} cannot be handed back into the sandbox")


def _no_object(body: list) -> Any:
    raise PermissionError(f"a call back takes values, not a {str(body[2])[:60]}")


def confined_file(path: Path, roots: Iterable[Path]) -> Path:
    """``path`` if it is a regular file (not a link) inside one of ``roots``, else ValueError:
    the trusted side never follows a name the sandbox planted to a file outside its scratch."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    if path.is_symlink() or not any(real.is_relative_to(root) for root in roots):
        raise ValueError(f"{path} is not a file of this run's own directory")
    if real.exists() and not real.is_file():
        raise ValueError(f"{path} is not a regular file")
    return real
