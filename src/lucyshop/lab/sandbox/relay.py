"""A sandbox has no network but its own loopback; a relay lets it reach one service.

The trusted side serves a Unix socket in a directory the sandbox is shown (``Relay``) and
forwards each connection to the real service: by default a port of the host's loopback (the
checkpoint's supplier), or any Unix socket or TCP address (``target``: a PostgreSQL server,
whose clients find it as ``.s.PGSQL.5432`` in the directory they are given as ``host``).
Inside, ``listen_inside`` listens on the same port of the sandbox's own loopback and forwards
to that socket. So the sandboxed code uses the service's usual address, and reaches that
service and nothing else: not the other services on the host, not another student's supplier.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import stat
import tempfile
import threading
from pathlib import Path

CHUNK = 65536
BACKLOG = 16


def pump(source: socket.socket, target: socket.socket) -> None:
    """Copy bytes one way until either side closes, then shut the other side's writing."""
    try:
        while data := source.recv(CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def join(a: socket.socket, b: socket.socket) -> None:
    """Forward both ways until both directions are done, then close both."""
    other = threading.Thread(target=pump, args=(b, a), daemon=True)
    other.start()
    pump(a, b)
    other.join()
    a.close()
    b.close()


def _serve(listener: socket.socket, connect) -> None:
    while True:
        try:
            accepted, _ = listener.accept()
        except OSError:
            return  # the listener was closed
        try:
            upstream = connect()
        except OSError:
            accepted.close()
            continue
        threading.Thread(target=join, args=(accepted, upstream), daemon=True).start()


def _connect(target: str | tuple[str, int], idle: float | None) -> socket.socket:
    """A connection to the relayed service (a Unix socket's path, or a TCP address), given 30 s
    to open; ``idle`` bounds each wait for data on it after that (None: no bound)."""
    if isinstance(target, str):
        upstream = socket.socket(socket.AF_UNIX)
        upstream.settimeout(30)
        try:
            upstream.connect(target)
        except OSError:
            upstream.close()
            raise
    else:
        upstream = socket.create_connection(target, timeout=30)
    upstream.settimeout(idle)
    return upstream


INSIDE = Path("/sandbox/relay")  # where a relay's directory appears in a sandbox
NAME = "s"
PARENT = Path("/tmp")
PREFIX = "ch13r-"  # then the pid of the process that serves it, "-", and mkdtemp's letters


def sweep_dead() -> list[Path]:
    """Remove the directories of relays whose process is gone: one killed before it could close
    its relay (a check ends the process of a test that hangs) leaves it, and nothing else
    would. Only ours, each named for its process; the ones removed. (Processes in another PID
    namespace that share this ``/tmp`` as the same user would count as gone.)"""
    removed = []
    for path in PARENT.glob(f"{PREFIX}*-*"):
        pid = path.name[len(PREFIX) :].split("-", 1)[0]
        try:
            found = path.lstat()
        except OSError:
            continue
        mine = found.st_uid == os.geteuid() and stat.S_ISDIR(found.st_mode)
        if mine and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or no pid at all
        return False
    except PermissionError:
        pass  # another user's process
    return True


class Relay:
    """Trusted side: a Unix socket, ``path``, that forwards to ``127.0.0.1:port``, or to
    ``target`` (the path of a Unix socket, or a ``(host, port)`` pair).

    It lives in a short directory of its own under the system's temporary directory (a socket's
    path may not exceed 107 bytes, and a run's own directory can be deeper than that), which
    a sandbox sees read-only at ``INSIDE`` (or wherever it is shown); ``name`` is the socket's
    name in it."""

    def __init__(
        self,
        port: int | None = None,
        *,
        target: str | tuple[str, int] | None = None,
        name: str = NAME,
    ) -> None:
        idle: float | None = None  # a database connection may rest between two statements
        if target is None:
            if port is None:
                raise ValueError("a relay needs a port or a target")
            target, idle = ("127.0.0.1", port), 30.0
        sweep_dead()
        self.directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=PARENT))
        self.directory.chmod(0o755)
        self.path, self.port, self.target = self.directory / name, port, target
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(self.path))
        os.chmod(self.path, 0o666)  # the sandbox's user must be able to connect
        self.listener.listen(BACKLOG)
        connect = functools.partial(_connect, target, idle)
        self.thread = threading.Thread(target=_serve, args=(self.listener, connect), daemon=True)
        self.thread.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def listen_inside(port: int, path: str) -> None:
    """Sandbox side: ``127.0.0.1:port`` forwards to the Unix socket ``path``."""
    listener = socket.socket(socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(BACKLOG)

    def connect() -> socket.socket:
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(path)
        return upstream

    threading.Thread(target=_serve, args=(listener, connect), daemon=True).start()
