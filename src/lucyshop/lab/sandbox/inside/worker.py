"""The process inside the sandbox: it imports the student's file and runs calls for the
trusted side, over the channel on descriptor ``FD``.

    python -m lucyshop.lab.sandbox.inside.worker FD LOG

Nothing here is trusted: the student's code shares this process and may rewrite any of it.
That is fine, because nothing here decides anything. The trusted side vets the values it
gets back, the exceptions, and the files it reads itself; a worker that lies only lies
about its own student's functions, and a worker that dies or hangs is ended by the caller.

The student's prints go to ``LOG``, never to the channel.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import socket
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop.lab.loader import CHAPTER, EXERCISES, MODULE
from lucyshop.lab.sandbox import wire

MODULES = {CHAPTER: MODULE, EXERCISES: "ch13_exercises"}
KIT = (  # the kit modules the trusted side may call in here
    "lucyshop.lab.sandbox.inside.shop_probes",
    "lucyshop.lab.sandbox.inside.pg_probes",
)
STUDENT_DIRS: set[str] = set()  # where the loaded student files are: their frames are named
COMPILED: dict[tuple[bytes, str], Any] = {}  # (a file's bytes, its path) -> its code


class CompiledOnce(importlib.machinery.SourceFileLoader):
    """Loads a file as Python's own loader does, but compiles the same bytes at the same path
    only once in this process: a test loads the student's file afresh (a new module, run from
    the top), and the sandbox may not write ``__pycache__``, so each load compiled it again
    (about 5 ms for the reference, a few hundred loads a check)."""

    def source_to_code(self, data: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (bytes(data), str(path))
        if key not in COMPILED:
            COMPILED[key] = super().source_to_code(data, path, *args, **kwargs)
        return COMPILED[key]


class Trusted:
    """An object of the trusted side, seen here: each method call goes back over the channel."""

    def __init__(self, worker: Worker, handle: list) -> None:
        object.__setattr__(self, "_worker", worker)
        object.__setattr__(self, "_handle", handle)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        worker, handle = self._worker, self._handle
        kind, value = worker.callback(handle, name, None, None)
        if kind == "value":
            return value

        def method(*args: Any, **kwargs: Any) -> Any:
            return worker.callback(handle, name, args, kwargs)

        return method

    def __iter__(self) -> Any:
        return iter(self._worker.callback(self._handle, "__iter__", (), {}))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._worker.callback(self._handle, "__call__", args, kwargs)

    def __repr__(self) -> str:
        return f"<{self._handle[2]} of the trusted side>"


class Worker:
    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.objects: dict[int, Any] = {}
        self.modules: dict[str, ModuleType] = {}
        self.codec = wire.Codec(self._handle_of, self._object_of, self._data_of)

    # ------------------------------------------------------------ values

    def _handle_of(self, value: Any) -> dict:
        if isinstance(value, Trusted):
            return {"$handle": value._handle}
        number = len(self.objects) + 1
        self.objects[number] = value
        return wire.handle("worker", number, _type_name(value))

    def _object_of(self, body: list) -> Any:
        side, number, name = body
        if side == "trusted":
            return Trusted(self, body)
        if side == "module":
            return self.modules[name]
        if number not in self.objects:
            raise wire.BadFrame(f"no object {number} here")
        return self.objects[number]

    def _data_of(self, module: str, name: str, fields: dict[str, Any]) -> Any:
        cls = self._find(module, name)
        return cls(**fields)

    def _find(self, module: str, name: str) -> Any:
        if module in self.modules:
            owner: Any = self.modules[module]
        elif module in MODULES.values() and module in sys.modules:  # loaded by the answers
            owner = sys.modules[module]
        elif module == "lucyshop" or module.startswith("lucyshop."):
            owner = importlib.import_module(module)
        else:
            raise wire.BadFrame(f"no class {module}.{name} here")
        for part in name.split("."):
            owner = getattr(owner, part)
        return owner

    # ------------------------------------------------------------ requests

    def serve(self) -> None:
        """Answer requests until the channel closes."""
        while True:
            try:
                message = wire.receive(self.channel)
            except wire.ChannelClosed:
                return
            self.answer(message)

    def answer(self, message: dict[str, Any]) -> None:
        try:
            value = self.run(message)
            reply = {"op": "value", "value": self.codec.encode(value)}
        except BaseException as error:  # noqa: BLE001 (every failure is the caller's to weigh)
            reply = {"op": "error", "error": wire.describe(error, STUDENT_DIRS)}
        wire.send(self.channel, reply | {"id": message.get("id")})  # the request it answers

    def run(self, message: dict[str, Any]) -> Any:
        op = message["op"]
        if op == "load":
            return self.load(Path(message["path"]))
        if op == "get":
            target = self.codec.decode(message["target"])
            return getattr(target, message["name"])
        if op == "kit" and message.get("name") in KIT:
            self.modules[message["name"]] = importlib.import_module(message["name"])
            return message["name"]
        if op == "signature":
            return signature_of(self.codec.decode(message["target"]))
        if op == "get_module":
            return getattr(self.modules[message["module"]], message["name"])
        if op == "call":
            target = self.codec.decode(message["target"])
            args = self.codec.decode(message["args"])
            kwargs = self.codec.decode(message["kwargs"])
            return target(*args, **kwargs)
        raise wire.BadFrame(f"unknown op {op!r}")

    def load(self, path: Path) -> str:
        """Execute the student's file as a fresh module; forget every object of the last one."""
        for value in self.objects.values():
            if isinstance(value, sqlite3.Connection):
                try:
                    value.close()
                except Exception:  # noqa: BLE001, S110 (the student's subclass may refuse)
                    pass
        self.objects.clear()
        name = MODULES.get(path.name, path.stem)
        STUDENT_DIRS.add(str(path.parent))
        spec = importlib.util.spec_from_file_location(
            name, path, loader=CompiledOnce(name, str(path))
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        self.modules[name] = module
        spec.loader.exec_module(module)
        return name

    def callback(self, handle: list, name: str, args: tuple | None, kwargs: dict | None) -> Any:
        """Call a method of a trusted object (or, without ``args``, ask whether ``name`` is a
        method or a value) and wait for the answer, serving nested calls meanwhile."""
        request = {"op": "callback", "target": {"$handle": handle}, "name": name}
        if args is not None:  # a call; without arguments, a question about the attribute
            request |= {"args": self.codec.encode(list(args)), "kwargs": self.codec.encode(kwargs)}
        wire.send(self.channel, request)
        while True:
            message = wire.receive(self.channel)
            if message["op"] == "value":
                return self.codec.decode(message["value"])
            if message["op"] == "error":
                raise rebuilt(message["error"])
            self.answer(message)


def signature_of(function: Any) -> list[list]:
    """A function's parameters as data: [name, kind, has a default, the default]."""
    parameters = inspect.signature(function).parameters.values()
    return [
        [p.name, p.kind.name, p.default is not p.empty, None if p.default is p.empty else p.default]
        for p in parameters
    ]


def _type_name(value: Any) -> str:
    cls = value if isinstance(value, type) else type(value)
    kind = "class" if isinstance(value, type) else "function" if callable(value) else "object"
    return f"{kind} {cls.__module__}.{cls.__qualname__}"


class Refused(RuntimeError):
    """A callback that the trusted side answered with an error of a type not found here."""


def rebuilt(error: dict[str, Any]) -> BaseException:
    """The trusted side's exception as its own type (a supplier client's
    ``SupplierUnavailable`` stays one, so the code that catches it still does)."""
    try:
        cls = getattr(importlib.import_module(error["module"]), error["type"])
    except (KeyError, ImportError, AttributeError, TypeError, ValueError):
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return Refused(f"{error.get('type')}: {error.get('message')}")
    found = cls.__new__(cls)
    Exception.__init__(found, error.get("message", ""))
    for name, value in (error.get("attrs") or {}).items():
        setattr(found, name, value)
    return found


def main(argv: list[str]) -> int:
    fd, log = int(argv[0]), argv[1]
    channel = socket.socket(fileno=fd)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    from lucyshop.lab.loader import _ImportBlocker

    sys.meta_path.insert(0, _ImportBlocker())  # the one-line message for `import solutions`
    Worker(channel).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
