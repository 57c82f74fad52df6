"""What the trusted side hands, asks or does inside the worker, where the student's SQLite shop
objects are: a stand-in connection whose statements run on the trusted side, the classes an
object is an instance of, the file a connection has open, the runtime's own connection, and
model calls refused while a recovery runs.

No fault is timed from in here: a probe shares the worker with the student's module, which
can replace it (a swapped trace callback once asked the injected rival in only while the
student held the write lock). So a shop file a fault is injected into lives in a directory of
the trusted side's own, and the worker gets ``connection(server)``: a stand-in for
``sqlite3.Connection`` whose every statement is a call back to the trusted side's
``lucyshop.lab.sandbox.served.Server``. The stand-in runs in the worker, where the student may
rewrite it; that changes nothing, since the file changes only through the server.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from lucyshop.store import Transactions


def connection(server: Any) -> Connection:
    """The worker's stand-in for a connection to the served file (``server`` is a handle)."""
    return Connection(server)


class Row:
    """What ``sqlite3.Row`` offers: items by position or by name (any case), and keys."""

    def __init__(self, columns: list[str], values: list[Any]) -> None:
        self._columns, self._values = columns, tuple(values)

    def __getitem__(self, key: int | str | slice) -> Any:
        if isinstance(key, str):
            lowered = [name.lower() for name in self._columns]
            if key.lower() not in lowered:
                raise IndexError(f"No item with that key: {key}")
            return self._values[lowered.index(key.lower())]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._columns)

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Row) and (self._columns, self._values) == (
            other._columns,
            other._values,
        )

    def __hash__(self) -> int:
        return hash((tuple(self._columns), self._values))

    def __repr__(self) -> str:
        return f"<Row {self._values!r}>"


class Cursor:
    """The rows of one served statement."""

    def __init__(self, connection: Connection, answer: dict | None = None) -> None:
        self.connection = connection
        self._take(answer or {"columns": [], "rows": [], "lastrowid": None, "rowcount": -1})

    def _take(self, answer: dict) -> None:
        columns = answer["columns"]
        self.description = tuple((name, *(None,) * 6) for name in columns) or None
        self.lastrowid, self.rowcount = answer["lastrowid"], answer["rowcount"]
        factory = self.connection.row_factory
        rows = answer["rows"]
        if factory is sqlite3.Row or factory is Row:
            self._rows = [Row(columns, row) for row in rows]
        elif factory is None:
            self._rows = [tuple(row) for row in rows]
        else:
            self._rows = [factory(self, tuple(row)) for row in rows]

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        self._take(self.connection._run(sql, parameters))
        return self

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchmany(self, size: int = 1) -> list:
        taken, self._rows = self._rows[:size], self._rows[size:]
        return taken

    def fetchall(self) -> list:
        taken, self._rows = self._rows, []
        return taken

    def __iter__(self) -> Iterator[Any]:
        while self._rows:
            yield self._rows.pop(0)

    def close(self) -> None:
        self._rows = []


class Connection(Transactions):
    """A stand-in for the kit's shop (autocommit, explicit transactions, the book's
    ``immediate()``, ``migrate(...)`` and ``connection``, like ``lucyshop.store.connect``'s)
    whose statements run on the trusted side."""

    isolation_level = None

    def __init__(self, server: Any) -> None:
        self._server = server
        self.row_factory: Any = sqlite3.Row
        self.in_transaction = False
        self.total_changes = 0

    def _run(self, sql: str, parameters: Sequence[Any] | dict[str, Any]) -> dict:
        values = dict(parameters) if isinstance(parameters, dict) else list(parameters)
        answer = self._server.execute(sql, values)
        self.in_transaction = bool(answer["in_transaction"])
        self.total_changes += max(0, answer["rowcount"] or 0)
        return answer

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        return Cursor(self, self._run(sql, parameters))

    def executemany(self, sql: str, seq: Any) -> Cursor:
        cursor = Cursor(self)
        for parameters in seq:
            cursor.execute(sql, parameters)
        return cursor

    def cursor(self) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:
        if self.in_transaction:
            self._run("COMMIT", ())

    def rollback(self) -> None:
        if self.in_transaction:
            self._run("ROLLBACK", ())

    def close(self) -> None:
        self.rollback()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> bool:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()
        return False


def kinds(value: Any) -> list[str]:
    """Every class ``value`` is an instance of, as ``module.Qualname`` (its MRO)."""
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in type(value).__mro__]


def database_file(connection: sqlite3.Connection) -> str:
    """The file a connection has open (the trusted side makes sure it lies in its scratch)."""
    return connection.execute("PRAGMA database_list").fetchone()[2]


def connect(path: str) -> sqlite3.Connection:
    """The runtime's own connection to a shop file, made in here (a test's second writer)."""
    from lucyshop.store import connect as shop

    return shop(path)


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
