"""Hostile: the worker's own channel, written behind the worker's back (appended to a file whose
every function raises ``_NotYet``).

The student's code shares the worker's process, so it can reach the socket the worker answers
on (a local of the frame that is running the call) and write frames of its own:

- ``percentile`` sends a frame header, then one byte a second, forever: a reply that never
  ends, though bytes keep coming (a deadline per ``recv`` is never reached).
- ``detection_delay`` answers with a frame of about ``PARAMS["megabytes"]`` MB of empty lists,
  under the byte cap, then sleeps: decoded, it would grow the trusted side by gigabytes.
- ``fenced`` answers twice: first a frame of its own with the right answer (its own
  function, so that is its own lie to tell), then the worker's real reply, a string with
  ``LEFTOVER`` in it, which is left on the channel for whatever call comes next.
"""

PARAMS = {}  # the test writes what this file is told here

import json as _json
import struct as _struct
import sys as _sys
import time as _time


class _NotYet(Exception):
    pass


def _channel():
    """The worker's socket and the request now being answered (found up the stack)."""
    frame = _sys._getframe(1)
    while frame is not None:
        owner, message = frame.f_locals.get("self"), frame.f_locals.get("message")
        if hasattr(owner, "channel") and isinstance(message, dict):
            return owner.channel, message
        frame = frame.f_back
    raise _NotYet("no channel found")


def _frame(body):
    return _struct.pack(">I", len(body)) + body


def percentile(values, q):
    channel, _message = _channel()
    channel.sendall(_struct.pack(">I", 1000))  # a header: 1000 bytes to come
    while True:
        channel.sendall(b" ")  # JSON allows spaces: each one is progress of a kind
        _time.sleep(1)


def detection_delay(lease, turn, scan):
    channel, message = _channel()
    count = PARAMS.get("megabytes", 63) * 1024 * 1024 // 3
    head = b'{"op":"value","id":' + _json.dumps(message.get("id")).encode() + b',"value":['
    channel.sendall(_frame(head + b"[]," * (count - 1) + b"[]]}"))
    _time.sleep(3600)


def fenced(writer_generation, current_generation):
    channel, message = _channel()
    answer = {
        "op": "value",
        "id": message.get("id"),
        "value": writer_generation == current_generation,
    }
    channel.sendall(_frame(_json.dumps(answer).encode()))
    return "LEFTOVER of fenced: read by a call that did not ask for it"
