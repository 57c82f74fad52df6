"""Stand-ins on the trusted side for what lives in the worker, and the way a test reaches them.

- ``Remote``: an object that stays in the worker (a module, a function, a class, a
  connection), reached by a handle: reading an attribute or calling it is a request.
- ``Mirror``: our own connection to a shop file, paired with the worker's connection to the
  same file, so a test reads the file and never the student's answer about it.
- ``remote_attribute``: what a returned dataclass answers for a name that is not a field (a
  property such as ``Claim.worker_id``): the worker is asked.

Kept apart from ``remote`` (which starts, calls and stops the worker) because these are what
the tests hold; a ``Remote`` only ever talks to its own ``Sandbox``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucyshop.lab.sandbox.errors import TimedOutBefore
from lucyshop.store import ShopConnection

if TYPE_CHECKING:
    from lucyshop.lab.sandbox.remote import Sandbox

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


def remote_attribute(self: Any, name: str) -> Any:
    """An attribute of a returned dataclass that is not a field: asked of the worker."""
    if name.startswith("__"):
        raise AttributeError(name)
    sandbox: Sandbox = type(self)._sandbox
    what = f"{type(self).__qualname__}.{name}"
    if what in sandbox.hung:
        raise TimedOutBefore(what)
    message = {"op": "get", "target": sandbox.codec.encode(self), "name": name}
    return sandbox.request(message, f"reading {what}")


class Mirror(ShopConnection):
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


def _fails_at_once(name: str):
    def failing(*_args: Any, **_kwargs: Any) -> None:
        raise TimedOutBefore(name)

    return failing
