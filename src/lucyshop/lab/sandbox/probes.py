"""What the trusted side asks or does inside the worker, where the student's objects are.

``kinds`` names the classes an object is an instance of. For fault injection, only the
moment is found here; the fault itself is the trusted side's. ``watch`` calls the
trusted ``rival.moment()`` at every statement the student's connection starts after one that
reads ``assignment_leases`` (the holder check), until the rival says it took the work over.
The rival runs on the trusted side's own connection, so it knows by itself whether it took
the work over or found the write lock held (the check and the write in one transaction), and
a test that never heard from it fails rather than passes: switching this off turns no test
green.
"""

from __future__ import annotations

import sqlite3
from typing import Any, ClassVar


def watch(connection: sqlite3.Connection, rival: Any) -> None:
    state = {"read": False, "done": False}

    def statement(sql: str) -> None:
        if state["done"]:
            return
        if state["read"]:
            state["done"] = bool(rival.moment(sql[:200]))
        elif "assignment_leases" in sql:
            state["read"] = True

    connection.set_trace_callback(statement)


def unwatch(connection: sqlite3.Connection) -> None:
    connection.set_trace_callback(None)


def kinds(value: Any) -> list[str]:
    """Every class ``value`` is an instance of, as ``module.Qualname`` (its MRO)."""
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in type(value).__mro__]


def database_file(connection: sqlite3.Connection) -> str:
    """The file a connection has open (the trusted side checks it lies in its scratch)."""
    return connection.execute("PRAGMA database_list").fetchone()[2]


def connect(path: str) -> sqlite3.Connection:
    """The runtime's own connection to a shop file, made in here (a test's second writer)."""
    from lucyshop.store import connect as runtime_connect

    return runtime_connect(path)


class _Refusals:
    """Model calls refused while a recovery runs, counted (``refuse_models``)."""

    saved: ClassVar[dict] = {}
    calls = 0


def refuse_models() -> None:
    """From now on every model turn in this worker is refused and counted."""
    from lucyshop import models

    refusing = models.RefusingModel()

    def chat(_self: Any, *args: Any, **kwargs: Any) -> Any:
        _Refusals.calls += 1
        return refusing.chat(*args, **kwargs)

    _Refusals.calls = 0
    for cls in (models.EmbeddedModel, models.OllamaModel):
        _Refusals.saved.setdefault(cls, cls.chat)
        cls.chat = chat


def model_calls() -> int:
    return _Refusals.calls


def allow_models() -> None:
    for cls, chat in _Refusals.saved.items():
        cls.chat = chat
    _Refusals.saved.clear()
