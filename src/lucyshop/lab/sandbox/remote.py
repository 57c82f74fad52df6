"""The trusted side of a sandboxed worker: start it, call the student's functions, judge.

``Sandbox(impl, scratch=[...])`` stages the student's files, starts one worker in the jail
(``jail.py``) and hands out ``module()``: a stand-in for the student's module whose
functions run in the worker. Values cross by value (``wire.py``): a dataclass the student
returns arrives as a frozen dataclass of the same name and fields built here (its other
attributes, a property such as ``Claim.worker_id``, are asked of the worker); an object that
cannot travel (a connection, a queue) stays in the worker and is reached by a handle; an
object of ours that cannot travel (a supplier client) stays here and the worker calls its
public methods back. An exception is rebuilt here from its type's name: the kit's and the
standard library's own types from a fixed list, anything else as a ``StudentError``. Nothing
from the worker is unpickled, imported or executed.

Every call has a deadline (``until``). A worker that runs past it is killed (its whole
sandbox with it) and the call raises ``CallTimedOut``; a worker that exits raises
``WorkerDied``. Either way the next ``load`` starts a fresh one.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import keyword
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.sandbox import jail, wire
from lucyshop.lab.services.processes import descendants

MAX_FIELDS = 64  # a dataclass from the sandbox with more is refused, not built
STUDENT_CHARS = 2000  # at most this much of a message from the sandbox is kept
START_TIMEOUT = 120.0  # the worker's first answer (a loaded machine starts Python slowly)
FOREVER = 3600.0
LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()  # this process's workers, for sandbox_pids


def sandbox_pids() -> set[int]:
    """Every process of this process's live sandboxes: started on purpose, ended by their
    owners (a suite-wide check for leftover processes leaves them out)."""
    return set().union(*(box.pids() for box in list(LIVE)))


class StudentError(Exception):
    """An exception of a type this side does not rebuild (the student's own, say)."""

    remote_type = "Exception"


class CallTimedOut(TimeoutError):
    """A call into the sandbox ran past its deadline; the worker was killed."""

    def __init__(self, function: str, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s in {function}()")
        self.function, self.seconds = function, seconds


class WorkerDied(RuntimeError):
    """The worker ended (os._exit, a signal, a crash) while running a call."""

    def __init__(self, function: str, status: int | None, said: str = "") -> None:
        how = "was killed" if status is None or status < 0 else f"exited with status {status}"
        told = f"; the sandbox said: {said}" if said else ""
        super().__init__(
            f"the process running {function}() {how} (os._exit, a signal or a crash){told}"
        )
        self.function, self.said = function, said


class TimedOutBefore(RuntimeError):
    """A function that already hung or ended its worker, failing fast in later tests."""

    def __init__(self, function: str) -> None:
        self.function = function
        super().__init__(f"{function}() hung or ended the process in an earlier test")


# The exception types rebuilt as themselves; every other type becomes a StudentError.
_BUILTIN = (
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BlockingIOError",
    "BrokenPipeError",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "EOFError",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "InterruptedError",
    "ImportError",
    "IndexError",
    "IsADirectoryError",
    "KeyError",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "NotADirectoryError",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PermissionError",
    "ProcessLookupError",
    "RecursionError",
    "RuntimeError",
    "TimeoutError",
    "TypeError",
    "UnboundLocalError",
    "UnicodeError",
    "ValueError",
    "ZeroDivisionError",
)
_KNOWN_PLACES = {
    "sqlite3": "Error DatabaseError IntegrityError OperationalError ProgrammingError"
    " InterfaceError DataError NotSupportedError Warning",
    "lucyshop.store": "WriteLockTimeout",
    "lucyshop.supplier.client": "SupplierUnavailable SupplierRefused",
    "lucyshop.models": "ModelUnavailable ModelRefused",
    "lucyshop.lab.loader": "ReferenceBlocked",
}


def _known() -> dict[tuple[str, str], type[BaseException]]:
    import importlib

    known: dict[tuple[str, str], type[BaseException]] = {
        ("builtins", name): getattr(builtins, name) for name in _BUILTIN
    }
    for module, names in _KNOWN_PLACES.items():
        owner = importlib.import_module(module)
        for name in names.split():
            known[(module, name)] = getattr(owner, name)
    return known


_STUDENT_TYPES: dict[str, type[StudentError]] = {}
CALLBACKS = ("__call__", "__iter__")  # the dunders a worker may use on what it was handed
PARAMETER_KINDS = {
    kind.name: kind
    for kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    )
}


def student_error_type(name: str) -> type[StudentError]:
    """A StudentError subclass that reads as the student's type name in a message."""
    name = name.rpartition(".")[2]
    if not name.isidentifier() or keyword.iskeyword(name) or len(name) > 60:
        name = "StudentError"
    if name not in _STUDENT_TYPES:
        _STUDENT_TYPES[name] = type(name, (StudentError,), {"remote_type": name})
    return _STUDENT_TYPES[name]


def _short(value: Any) -> str:
    return value[:STUDENT_CHARS] if isinstance(value, str) else ""


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
        self.trusted: dict[int, Any] = {}
        self._known = _known()
        self._mirrors: dict[tuple, type] = {}
        self.codec = wire.Codec(self._handle_of, self._object_of, self._data_of)
        self.values_only = wire.Codec(_no_handle, self._object_of, self._data_of)

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
        command = [sys.executable, "-m", "lucyshop.lab.sandbox.worker", str(there.fileno())]
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
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
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
        if self.channel is None:
            raise WorkerDied(what, None)
        deadline = time.monotonic() + limit
        try:
            wire.send(self.channel, message)
            while True:
                self.channel.settimeout(max(0.001, deadline - time.monotonic()))
                reply = wire.receive(self.channel)
                if reply["op"] != "callback":
                    break
                self._callback(reply)
        except TimeoutError:
            self.stop()
            raise CallTimedOut(what.split(" ")[-1], told) from None
        except (wire.ChannelClosed, OSError, wire.BadFrame):
            status = self._ended()
            raise WorkerDied(what.split(" ")[-1], status, self._last_word()) from None
        if reply["op"] == "value":
            return self.codec.decode(reply["value"])
        if reply["op"] == "error":
            raise self.rebuilt(reply.get("error"))
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

    def _callback(self, message: dict[str, Any]) -> None:
        """Run what the worker asks of an object we handed it: read a value, call a method,
        call it, iterate it. Only public names; the answer goes back by value only (a result
        that would need a handle is refused), so the worker reaches nothing but the objects a
        test handed in."""
        try:
            target = self.codec.decode(message["target"])
            if not any(target is value for value in self.trusted.values()):
                raise PermissionError("the sandbox may call back only what it was handed")
            name = message.get("name")
            if not isinstance(name, str) or (name.startswith("_") and name not in CALLBACKS):
                raise PermissionError(f"the sandbox may not use {name!r}")
            if "args" not in message:  # a question: is ``name`` a method, or a value to send?
                found = getattr(target, name)
                value = ("method", None) if callable(found) else ("value", found)
            elif name == "__iter__":
                value = list(target)
            else:
                args = self.codec.decode(message["args"])
                kwargs = self.codec.decode(message["kwargs"])
                function = target if name == "__call__" else getattr(target, name)
                value = function(*args, **kwargs)
            answer = {"op": "value", "value": self.values_only.encode(value)}
        except Exception as error:  # noqa: BLE001 (it goes back to the worker as its error)
            answer = {"op": "error", "error": wire.describe(error)}
        wire.send(self.channel, answer)

    # ------------------------------------------------------------ values

    def _handle_of(self, value: Any) -> dict:
        if isinstance(value, Remote):
            return {"$handle": value._handle["$handle"]}
        twin = getattr(value, "remote", None) if getattr(type(value), "paired", False) else None
        if isinstance(twin, Remote):  # a Mirror (or a PostgreSQL one): the worker's own
            return {"$handle": twin._handle["$handle"]}
        if isinstance(value, (sqlite3.Connection, sqlite3.Cursor, type, type(sys))):
            raise TypeError(f"a {type(value).__name__} of the trusted side cannot be handed in")
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
        if key not in self._mirrors:
            short = name.rpartition(".")[2]
            cls = dataclasses.make_dataclass(
                short if short.isidentifier() else "Data",
                list(fields),
                frozen=True,
                namespace={"__getattr__": _remote_attribute, "_sandbox": self},
            )
            cls.__module__, cls.__qualname__ = module, name
            self._mirrors[key] = cls
        return self._mirrors[key](**fields)

    def rebuilt(self, error: Any) -> BaseException:
        """The worker's exception as one of ours (see the module's docstring)."""
        if not isinstance(error, dict):
            return StudentError("an exception the sandbox could not describe")
        module, name = _short(error.get("module")), _short(error.get("type"))
        message = _short(error.get("message"))
        attrs = error.get("attrs") if isinstance(error.get("attrs"), dict) else {}
        if (module, name) == ("lucyshop.lab.given.stubs", "NotStarted"):
            function, section = _short(attrs.get("function")), _short(attrs.get("section"))
            rebuilt: BaseException = NotStarted(function, section, where=self.shown)
        else:
            cls = self._known.get((module, name))
            if cls is None:
                rebuilt = student_error_type(name)(message)
            else:
                rebuilt = cls.__new__(cls)
                BaseException.__init__(rebuilt, message)
                for attr in ("status", "error"):
                    if attr in attrs:
                        setattr(rebuilt, attr, attrs[attr])
        where = error.get("where")
        if isinstance(where, list) and len(where) == 3 and type(where[2]) is int:
            rebuilt.sandbox_where = (_short(where[0]), _short(where[1]), where[2])
        return rebuilt

    def mirror(self, remote: Remote, path: Path) -> Mirror:
        """Our own connection to the shop file at ``path`` (the path the test chose), paired
        with the worker's connection ``remote``: passing it to a student's function hands
        the worker its own connection; reading it reads the file, never the student's
        answer about the file."""
        path = checked_file(path, self.scratch)
        db = sqlite3.connect(path, factory=Mirror, isolation_level=None, timeout=5)
        db.row_factory = sqlite3.Row
        db.remote = remote
        return db


def _no_handle(value: Any) -> dict:
    raise PermissionError(f"a {type(value).__name__} cannot be handed back into the sandbox")


def checked_file(path: Path, roots: Iterable[Path]) -> Path:
    """``path`` if it is a regular file (not a link) inside one of ``roots``, else ValueError:
    the trusted side never follows a name the sandbox planted to a file outside its scratch."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    if path.is_symlink() or not any(real.is_relative_to(root) for root in roots):
        raise ValueError(f"{path} is not a file of this check's own directory")
    if real.exists() and not real.is_file():
        raise ValueError(f"{path} is not a regular file")
    return real


def _remote_attribute(self: Any, name: str) -> Any:
    """An attribute of a returned dataclass that is not a field: asked of the worker."""
    if name.startswith("__"):
        raise AttributeError(name)
    sandbox: Sandbox = type(self)._sandbox
    what = f"{type(self).__qualname__}.{name}"
    if what in sandbox.hung:
        raise TimedOutBefore(what)
    message = {"op": "get", "target": sandbox.codec.encode(self), "name": name}
    return sandbox.request(message, f"reading {what}")


class Mirror(sqlite3.Connection):
    """Our connection to a shop file, paired with the worker's connection to the same file.

    A class with ``paired = True`` is handed into the sandbox as its ``remote``: the worker
    gets its own connection, and reading ours reads the file, never the worker's answer."""

    paired = True
    remote: Remote | None = None


class Remote:
    """An object that stays in the worker: a module, a function, a class, a connection."""

    def __init__(self, sandbox: Sandbox, handle: dict, name: str) -> None:
        object.__setattr__(self, "_sandbox", sandbox)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        sandbox: Sandbox = self._sandbox
        if name in sandbox.hung:
            return _fails_at_once(name)
        if self._handle["$handle"][0] == "module":
            message = {"op": "get_module", "module": self._handle["$handle"][2], "name": name}
        else:
            message = {"op": "get", "target": self._handle, "name": name}
        value = sandbox.request(message, f"reading {name}")
        if isinstance(value, Remote):
            object.__setattr__(value, "_name", name)
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sandbox: Sandbox = self._sandbox
        if self._name in sandbox.hung:
            raise TimedOutBefore(self._name)
        message = {"op": "call", "target": self._handle}
        message |= {
            "args": sandbox.codec.encode(list(args)),
            "kwargs": sandbox.codec.encode(kwargs),
        }
        return sandbox.request(message, f"calling {self._name}")

    def __repr__(self) -> str:
        return f"<{self._name} in the sandbox>"

    @property
    def __signature__(self) -> inspect.Signature:
        """The parameters of the function in the worker (``inspect.signature`` reads this)."""
        sandbox: Sandbox = self._sandbox
        found = sandbox.request(
            {"op": "signature", "target": self._handle}, f"reading {self._name}"
        )
        if not isinstance(found, list):
            raise TypeError(f"no signature for {self._name}")
        parameters = []
        for name, kind, has_default, default in found:
            if not (isinstance(name, str) and name.isidentifier() and kind in PARAMETER_KINDS):
                raise TypeError(f"a parameter of {self._name} that is not one")
            default = default if has_default else inspect.Parameter.empty
            parameters.append(inspect.Parameter(name, PARAMETER_KINDS[kind], default=default))
        return inspect.Signature(parameters)


def sandboxed_shop(impl: Remote, path: Path) -> tuple[Mirror, Remote]:
    """``impl.open_worker_shop(path)`` in the sandbox: the student's connection comes back
    paired with our own connection to ``path``, the queue as a handle to the worker's."""
    connection, queue = impl.open_worker_shop(path)
    return impl._sandbox.mirror(connection, path), queue


def kind_of(value: Any) -> str:
    """What a handle stands for (``object sqlite3.Connection``), or the local type's name."""
    if isinstance(value, Remote):
        return value._handle["$handle"][2]
    return f"object {type(value).__module__}.{type(value).__qualname__}"


def _fails_at_once(name: str):
    def failing(*_args: Any, **_kwargs: Any) -> None:
        raise TimedOutBefore(name)

    return failing
