"""What the trusted side hands, asks or does inside the worker, where the student's SQLite shop
objects are: a stand-in connection whose statements run on the trusted side, the classes an
object is an instance of, the file a connection has open, the runtime's own connection, and
model calls refused while a recovery runs.

No fault is timed from in here: a probe shares the worker with the student's module, which
can replace it (a swapped trace callback once asked the injected rival in only while the
student held the write lock). So a shop file a fault is injected into lives in a directory of
the trusted side's own, and the worker gets ``connection(server)``: a stand-in for
``sqlite3.Connection`` whose every statement is a call back to the trusted side's
``lucyshop.lab.sandbox.served.ServedShop``. The stand-in runs in the worker, where the student may
rewrite it; that changes nothing, since the file changes only through the server.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from lucyshop.store import ShopConnection


def connection(server: Any) -> Connection:
    """The worker's stand-in for a connection to the served file (``server`` is a handle)."""
    return Connection(server)


EMPTY = {"columns": [], "rows": [], "lastrowid": None, "rowcount": -1, "in_transaction": False}


class Cursor(sqlite3.Cursor):
    """A ``sqlite3.Cursor`` holding the rows of one served statement, each made as the
    connection's ``row_factory`` would make it (a real ``sqlite3.Row`` by default)."""

    def __init__(self, connection: Connection, answer: dict | None = None) -> None:
        super().__init__(connection)
        self._take(answer or EMPTY)

    def _take(self, answer: dict) -> None:
        columns, rows = answer["columns"], answer["rows"]
        self._description = tuple((name, *(None,) * 6) for name in columns) or None
        self._lastrowid, self._rowcount = answer["lastrowid"], answer["rowcount"]
        factory = self.connection.row_factory
        if factory is sqlite3.Row and columns:
            shape = self.connection._shape(columns)  # a cursor of ours whose description is this
            self._rows = [sqlite3.Row(shape, tuple(row)) for row in rows]
        elif factory is None or factory is sqlite3.Row:
            self._rows = [tuple(row) for row in rows]
        else:
            self._rows = [factory(self, tuple(row)) for row in rows]

    @property
    def description(self) -> tuple | None:
        return self._description

    @property
    def lastrowid(self) -> int | None:
        return self._lastrowid

    @property
    def rowcount(self) -> int:
        return self._rowcount

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        self._take(self.connection._run(sql, parameters))
        return self

    def executemany(self, sql: str, seq: Any) -> Cursor:
        for parameters in seq:
            self.execute(sql, parameters)
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
        return self

    def __next__(self) -> Any:
        if not self._rows:
            raise StopIteration
        return self._rows.pop(0)

    def close(self) -> None:
        self._rows = []


class Connection(ShopConnection):
    """A stand-in for the kit's shop (autocommit, explicit transactions, the book's
    ``immediate()``, ``migrate(...)`` and ``connection``, like ``lucyshop.store.connect``'s)
    whose statements run on the trusted side. It is a ``sqlite3.Connection`` (to an empty
    database of its own, which only makes the rows' shapes), so that a writer cannot tell it
    from a real one by its type, nor its cursors and rows."""

    def __init__(self, server: Any) -> None:
        super().__init__(":memory:", isolation_level=None)
        self._server = server
        self.row_factory = sqlite3.Row
        self._in_transaction = False
        self._changes = 0

    @property
    def in_transaction(self) -> bool:
        return self._in_transaction

    @property
    def total_changes(self) -> int:
        return self._changes

    def _shape(self, columns: list[str]) -> sqlite3.Cursor:
        """A cursor of the empty database whose description names ``columns``."""
        names = ", ".join(f'NULL AS "{name.replace(chr(34), chr(34) * 2)}"' for name in columns)
        shape = sqlite3.Connection.cursor(self)
        shape.execute(f"SELECT {names}").fetchall()
        return shape

    def _run(self, sql: str, parameters: Sequence[Any] | dict[str, Any]) -> dict:
        values = dict(parameters) if isinstance(parameters, dict) else list(parameters)
        answer = self._server.execute(sql, values)
        self._in_transaction = bool(answer["in_transaction"])
        self._changes += max(0, answer["rowcount"] or 0)
        return answer

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> Cursor:
        return Cursor(self, self._run(sql, parameters))

    def executemany(self, sql: str, seq: Any) -> Cursor:
        return Cursor(self).executemany(sql, seq)

    def cursor(self, factory: Any = None) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:
        if self._in_transaction:
            self._run("COMMIT", ())

    def rollback(self) -> None:
        if self._in_transaction:
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
