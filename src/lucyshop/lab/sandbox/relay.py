"""A sandbox has no network but its own loopback; a relay lets it reach one service.

The trusted side serves a Unix socket in the shared scratch (``Relay``) and forwards each
connection to the real service on the host's loopback. Inside, ``listen_inside`` listens on
the same port of the sandbox's own loopback and forwards to that socket. So the sandboxed
code uses the service's usual address, and reaches that service and nothing else: not the
other services on the host, not another student's supplier.
"""

from __future__ import annotations

import contextlib
import os
import socket
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


class Relay:
    """Trusted side: ``path`` (a Unix socket) forwards to ``127.0.0.1:port``."""

    def __init__(self, path: Path, port: int) -> None:
        self.path, self.port = path, port
        self.listener = socket.socket(socket.AF_UNIX)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.listener.bind(str(path))
        os.chmod(path, 0o666)  # the sandbox's user must be able to connect
        self.listener.listen(BACKLOG)
        connect = lambda: socket.create_connection(("127.0.0.1", port), timeout=30)
        self.thread = threading.Thread(target=_serve, args=(self.listener, connect), daemon=True)
        self.thread.start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

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
