"""What a worker may call back on each kind of object the trusted side hands it.

An object of ours that cannot travel by value stays here, and the worker reaches it by a
handle: each call back names one attribute. Only the names on its kind's list are answered,
the calls the chapter's and the exercises' functions make of it and nothing more, so a
hand-in cannot reach what the object also offers the trusted side (the served shop's
``before``, which placed the rival where the worker chose; a supplier client's
``set_faults``). An object of a kind with no list is never handed in at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from lucyshop.lab.sandbox.served import ServedShop

SUPPLIER = frozenset({"identity", "timeout", "lookup", "order"})  # chapter 11's ``Supplier``
OFFERED: tuple[tuple[type, frozenset[str]], ...] = (
    (ServedShop, frozenset({"execute"})),
    (threading.Event, frozenset({"is_set", "wait"})),  # a stop flag (exercise 5's renewer)
)


class NotOffered(AttributeError):
    """A name the trusted side does not offer the sandbox on this object (an AttributeError,
    so ``hasattr`` and ``getattr(..., default)`` in honest code still work)."""


def offered(value: Any) -> frozenset[str]:
    """The names a worker may use on ``value``; TypeError for a kind that has none."""
    for kind, names in OFFERED:
        if isinstance(value, kind):
            return names
    if isinstance(value, type):
        raise TypeError(f"a class of the trusted side ({value.__name__}) cannot be handed in")
    if all(hasattr(value, name) for name in SUPPLIER):
        return SUPPLIER
    names = set()
    if callable(value):
        names.add("__call__")
    if isinstance(value, Iterable):
        names.add("__iter__")
    if not names:
        raise TypeError(
            f"a {type(value).__name__} of the trusted side cannot be handed in: the sandbox"
            " may call back only a served shop, a supplier, a stop event, a function or an"
            " iterable"
        )
    return frozenset(names)


def check(value: Any, name: Any) -> str:
    """``name`` if the worker may use it on ``value``, else ``NotOffered``."""
    names = offered(value)
    if not isinstance(name, str) or name not in names:
        raise NotOffered(
            f"the sandbox may not use {str(name)[:80]!r} of a {type(value).__name__}"
            f" (it may use {', '.join(sorted(names))})"
        )
    return name
