"""Student code in an OS sandbox, reached over a channel; every verdict stays outside.

- ``jail``: the OS boundary (bubblewrap; an unprivileged user; or none, said in one line).
- ``wire``: the framed JSON that crosses it, values by value.
- ``worker``: the process inside, which imports the student's file and runs calls.
- ``remote``: the trusted side: a stand-in module whose functions run in the worker.
"""

from lucyshop.lab.sandbox.jail import CannotIsolate, Jail, describe, isolation
from lucyshop.lab.sandbox.remote import (
    CallTimedOut,
    Mirror,
    Remote,
    Sandbox,
    StudentError,
    TimedOutBefore,
    WorkerDied,
    sandboxed_shop,
)

__all__ = [
    "CallTimedOut",
    "CannotIsolate",
    "Jail",
    "Mirror",
    "Remote",
    "Sandbox",
    "StudentError",
    "TimedOutBefore",
    "WorkerDied",
    "describe",
    "isolation",
    "sandboxed_shop",
]
