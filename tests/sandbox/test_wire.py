"""The wire's own bounds, on a real socket pair: a frame must arrive whole by one deadline,
however its bytes trickle in, and may hold only ``MAX_ITEMS`` values, counted before any of it
is decoded. (A hostile worker that does both in a real ``make check`` run:
``test_hostile_wire.py``.)
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from lucyshop.lab.sandbox import wire


def trickle(sock: socket.socket, data: bytes, every: float, stop: threading.Event) -> None:
    """Send ``data`` a byte every ``every`` seconds until it is sent or ``stop`` is set."""
    for byte in data:
        if stop.wait(every):
            return
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return


def test_a_frame_that_trickles_in_misses_its_one_deadline():
    """Each byte comes well within any per-recv timeout; the message still runs out of time."""
    here, there = socket.socketpair()
    stop = threading.Event()
    body = b'{"op":"value","value":"' + b" " * 200 + b'"}'
    sender = threading.Thread(
        target=trickle, args=(there, struct.pack(">I", len(body)) + body, 0.02, stop)
    )
    sender.start()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            wire.receive(here, time.monotonic() + 0.5)
        took = time.monotonic() - started
    finally:
        stop.set()
        sender.join(timeout=5)
        here.close()
        there.close()
    assert 0.5 <= took < 2.0, f"the deadline was 0.5 s; receive gave up after {took:.2f} s"


def test_a_frame_of_too_many_values_is_refused_before_it_is_built():
    here, there = socket.socketpair()
    count = wire.MAX_ITEMS + 1
    body = b'{"op":"value","value":[' + b"[]," * (count - 1) + b"[]]}"
    sender = threading.Thread(target=there.sendall, args=(struct.pack(">I", len(body)) + body,))
    sender.start()
    try:
        with pytest.raises(wire.BadFrame, match="value limit"):
            wire.receive(here, time.monotonic() + 30)
    finally:
        sender.join(timeout=30)
        here.close()
        there.close()


def test_a_frame_within_the_bounds_arrives():
    here, there = socket.socketpair()
    try:
        wire.send(there, {"op": "value", "value": [[]] * 1000}, time.monotonic() + 5)
        assert wire.receive(here, time.monotonic() + 5) == {"op": "value", "value": [[]] * 1000}
        assert not wire.pending(here)
        there.sendall(b"x")
        assert wire.pending(here)
    finally:
        here.close()
        there.close()
