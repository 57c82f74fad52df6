"""Student code in an OS sandbox, reached over a channel; every decision stays outside.

- ``jail``: the OS boundary (bubblewrap; an unprivileged user; or none, said in one line).
- ``wire``: the framed JSON that crosses it, values by value.
- ``inside``: all that runs inside the sandbox, beside the student's code, and is trusted for
  nothing: the ``worker`` that imports the student's file and runs calls, the probes the
  trusted side calls in there (``shop_probes``, ``pg_probes``), and the checkpoints' holder
  children (``holder``, ``pg_holder``).
- ``remote``: the trusted side: starts the worker and holds the conversation with it.
- ``handles``: what a test holds of the worker's objects (``Remote``, a paired ``Mirror``).
- ``callbacks``: what the worker may call back on each kind of object of ours handed to it.
- ``errors``: what a failure in the worker becomes here (our types, never the worker's).
- ``relay``: a Unix socket the worker is shown, forwarded to a server outside.
- ``served``: a shop file the trusted side serves to the worker statement by statement, so
  that it places an injected fault itself.
- ``postgres``: exercise 7's worker, shown a relay to a PostgreSQL server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lucyshop.lab.sandbox.errors import (
        CallTimedOut,
        StudentError,
        TimedOutBefore,
        WorkerDied,
    )
    from lucyshop.lab.sandbox.handles import Mirror, Remote, sandboxed_shop
    from lucyshop.lab.sandbox.jail import CannotIsolate, Jail, describe, isolation
    from lucyshop.lab.sandbox.remote import Sandbox

# Where each name lives, imported when first asked for: the worker, inside the sandbox, imports
# this package too (for ``wire``), and need not load the trusted side (psutil, subprocess, ...)
# at every start; a ``make check`` starts hundreds.
_HOMES = {
    "CallTimedOut": "errors",
    "StudentError": "errors",
    "TimedOutBefore": "errors",
    "WorkerDied": "errors",
    "Mirror": "handles",
    "Remote": "handles",
    "sandboxed_shop": "handles",
    "CannotIsolate": "jail",
    "Jail": "jail",
    "describe": "jail",
    "isolation": "jail",
    "Sandbox": "remote",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)


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
