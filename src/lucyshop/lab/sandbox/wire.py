"""What crosses between the trusted side and a sandboxed worker: framed JSON, values by value.

A frame is a 4-byte big-endian length and that many bytes of JSON, at most ``MAX_FRAME``.
JSON, never pickle: decoding a frame from the sandbox can build nothing but plain data, so a
hostile worker can send wrong values but never code.

Plain values (None, bool, int, float, str, list) are themselves. The rest are tagged objects:
``{"$tuple": [...]}`` (a ``sqlite3.Row`` too), ``{"$dict": [[key, value], ...]}``,
``{"$set": [...]}`` (and ``$frozenset``), ``{"$bytes": base64}``,
``{"$path": str}``, ``{"$datetime": ISO 8601}`` (a server's timestamp, its offset kept), a
dataclass by value as ``{"$data": [module, class, {field: value}]}``,
and anything else as a handle, ``{"$handle": [side, number, type name]}``: the object stays
in the process that owns it, and the other side calls it through the channel.

A frame from the sandbox is data to vet, never a fact: it must arrive whole by one deadline
for the message (not one per ``recv``: a worker that drips a byte a second still runs out of
time), and it may hold at most ``MAX_ITEMS`` values (a frame under the byte cap made of empty
lists would otherwise grow the trusted side by gigabytes as it is decoded).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import socket
import sqlite3
import struct
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MAX_FRAME = 64 * 1024 * 1024
MAX_ITEMS = 1_000_000  # values (containers, items, keys) in one frame, counted before decoding
MAX_DEPTH = 64
MAX_TIMESTAMP = 64  # characters of an ISO 8601 timestamp
_HEADER = struct.Struct(">I")


class ChannelClosed(EOFError):
    """The other end closed the channel (a worker that exited or was killed)."""


class BadFrame(ValueError):
    """A frame that is too large, not JSON, or not the shape the protocol allows."""


def send(sock: socket.socket, message: dict[str, Any], deadline: float | None = None) -> None:
    """Send one frame, whole by ``deadline`` (``time.monotonic()``; None: no deadline), else
    TimeoutError: a peer that stops reading cannot hold the sender."""
    data = json.dumps(message, allow_nan=True, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_FRAME:
        raise BadFrame(f"a message of {len(data)} bytes is over the {MAX_FRAME}-byte limit")
    sock.settimeout(_left(deadline))
    sock.sendall(_HEADER.pack(len(data)) + data)  # the timeout bounds the whole send


def receive(sock: socket.socket, deadline: float | None = None) -> dict[str, Any]:
    """One whole frame by ``deadline`` (None: wait for it), else TimeoutError."""
    (size,) = _HEADER.unpack(_read(sock, _HEADER.size, deadline))
    if size > MAX_FRAME:
        raise BadFrame(f"a frame of {size} bytes is over the {MAX_FRAME}-byte limit")
    data = _read(sock, size, deadline)
    # Every value but a scalar after another needs a bracket, a brace or a comma: an upper
    # bound on what decoding builds, counted in C before any of it is built.
    items = data.count(b",") + data.count(b"[") + data.count(b"{")
    if items > MAX_ITEMS:
        raise BadFrame(f"a frame of about {items} values is over the {MAX_ITEMS}-value limit")
    try:
        message = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise BadFrame(f"a frame that is not JSON: {str(error)[:100]}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise BadFrame("a frame without an op")
    return message


def _left(deadline: float | None) -> float | None:
    """Seconds to ``deadline`` for ``settimeout``; TimeoutError once it has passed."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the message's deadline passed")
    return left


def _read(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        sock.settimeout(_left(deadline))  # what is left of the message's one deadline
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ChannelClosed("the other end closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def pending(sock: socket.socket) -> bool:
    """Whether the peer wrote something no request asked for yet; ChannelClosed if it closed."""
    sock.settimeout(0)
    try:
        early = sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return False
    if not early:
        raise ChannelClosed("the other end closed the channel")
    return True


class Codec:
    """Encodes and decodes values for one side; ``handle_of`` and ``object_of`` say what
    that side does with objects that cannot travel by value."""

    def __init__(self, handle_of, object_of, data_of) -> None:
        self.handle_of = handle_of  # object -> {"$handle": ...}
        self.object_of = object_of  # [side, number, type] -> object
        self.data_of = data_of  # (module, class, fields) -> object

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise BadFrame(f"a value nested deeper than {MAX_DEPTH}")
        if value is None or isinstance(value, (bool, str)):
            return value
        if type(value) in (int, float):
            return value
        inner = depth + 1
        if type(value) is list:
            return [self.encode(item, inner) for item in value]
        if type(value) is tuple or isinstance(value, sqlite3.Row):
            return {"$tuple": [self.encode(item, inner) for item in value]}
        if type(value) is dict:
            return {
                "$dict": [[self.encode(k, inner), self.encode(v, inner)] for k, v in value.items()]
            }
        if type(value) in (set, frozenset):
            tag = "$set" if type(value) is set else "$frozenset"
            return {tag: [self.encode(item, inner) for item in value]}
        if type(value) is bytes:
            return {"$bytes": base64.b64encode(value).decode("ascii")}
        if _is_path(value):
            return {"$path": str(value)}
        if type(value) is datetime.datetime:
            return {"$datetime": value.isoformat()}
        fields = _dataclass_fields(value)
        if fields is not None:
            cls = type(value)
            data = {name: self.encode(getattr(value, name), inner) for name in fields}
            return {"$data": [getattr(cls, "__module__", ""), cls.__qualname__, data]}
        return self.handle_of(value)

    def decode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise BadFrame(f"a value nested deeper than {MAX_DEPTH}")
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        inner = depth + 1
        if isinstance(value, list):
            return [self.decode(item, inner) for item in value]
        if not isinstance(value, dict) or len(value) != 1:
            raise BadFrame(f"not a value of the protocol: {str(value)[:80]}")
        ((tag, body),) = value.items()
        if tag == "$tuple" and isinstance(body, list):
            return tuple(self.decode(item, inner) for item in body)
        if tag == "$dict" and isinstance(body, list):
            pairs = [self._pair(pair, inner) for pair in body]
            return dict(pairs)
        if tag in ("$set", "$frozenset") and isinstance(body, list):
            items = [self._key(self.decode(item, inner)) for item in body]
            return set(items) if tag == "$set" else frozenset(items)
        if tag in _TEXT and isinstance(body, str):
            return _TEXT[tag](body)
        if tag == "$data" and _is_data(body):
            module, name, fields = body
            return self.data_of(module, name, {k: self.decode(v, inner) for k, v in fields.items()})
        if tag == "$handle" and _is_handle(body):
            return self.object_of(body)
        raise BadFrame(f"not a value of the protocol: {tag}")

    def _pair(self, pair: Any, depth: int) -> tuple[Any, Any]:
        if not isinstance(pair, list) or len(pair) != 2:
            raise BadFrame("a dict entry that is not a pair")
        return self._key(self.decode(pair[0], depth)), self.decode(pair[1], depth)

    @staticmethod
    def _key(value: Any) -> Any:
        try:
            hash(value)
        except TypeError:
            raise BadFrame("a set member or dict key that cannot be hashed") from None
        return value


def _timestamp(body: str) -> datetime.datetime:
    if len(body) > MAX_TIMESTAMP:
        raise BadFrame(f"a timestamp of {len(body)} characters")
    try:
        return datetime.datetime.fromisoformat(body)
    except ValueError:
        raise BadFrame(f"not a timestamp: {body[:80]}") from None


# The tags whose body is one string, and what each string becomes.
_TEXT = {
    "$bytes": lambda body: base64.b64decode(body.encode("ascii"), validate=True),
    "$path": Path,
    "$datetime": _timestamp,
}


def _is_path(value: Any) -> bool:
    from pathlib import PurePath

    return isinstance(value, PurePath)


def _dataclass_fields(value: Any) -> list[str] | None:
    """The field names of a dataclass instance, else None."""
    if isinstance(value, type) or not dataclasses.is_dataclass(value):
        return None
    try:
        return [f.name for f in dataclasses.fields(value)]
    except TypeError:
        return None


def _is_data(body: Any) -> bool:
    return (
        isinstance(body, list)
        and len(body) == 3
        and all(isinstance(part, str) for part in body[:2])
        and isinstance(body[2], dict)
    )


def _is_handle(body: Any) -> bool:
    return (
        isinstance(body, list)
        and len(body) == 3
        and body[0] in ("trusted", "worker", "module")
        and type(body[1]) is int
        and isinstance(body[2], str)
    )


def handle(side: str, number: int, type_name: str) -> dict[str, Any]:
    return {"$handle": [side, number, type_name[:100]]}


def describe(error: BaseException, student_dirs: Iterable[str] = ()) -> dict[str, Any]:
    """An exception as data: its type, message, facts the kit's exceptions carry, and the
    innermost line of the student's files it passed through."""
    cls = type(error)
    found = {"module": cls.__module__, "type": cls.__qualname__, "message": _text(error)}
    attrs = {}
    for name in ("function", "section", "status", "error", "sqlite_errorcode", "sqlite_errorname"):
        value = getattr(error, name, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            attrs[name] = value
    found["attrs"] = attrs
    for frame, line in traceback.walk_tb(error.__traceback__):
        file = Path(frame.f_code.co_filename)
        if str(file.parent) in student_dirs:
            found["where"] = [file.name, frame.f_code.co_name, line]
    return found


def _text(error: BaseException) -> str:
    try:
        return str(error)[:2000]
    except BaseException:  # noqa: BLE001 (a __str__ that raises still gets a line)
        return f"<{type(error).__name__} whose message cannot be read>"
