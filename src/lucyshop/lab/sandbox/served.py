"""A shop file served statement by statement to a sandboxed worker, by the trusted side.

The worker gets a stand-in connection (``lucyshop.lab.sandbox.inside.shop_probes.connection``)
whose every statement is a call back to ``ServedShop``, the trusted side's connection to that
file. Before each statement the server calls ``before(number, sql)``, where the trusted side
places its rival; the worker cannot run a statement the server did not see, nor see the rival
coming. What the sandbox may ask of the file is bounded here: plain reads and writes of the
shop's tables, transactions and the busy timeout (no ATTACH, so no VACUUM INTO; no schema
change; no other pragma; none of the trusted side's own tables, which only the trusted side's
own triggers, named ``trusted_...``, may write), at most ``MAX_LENGTH`` bytes a value,
``MAX_ANSWER`` bytes an answer (counted while the rows are fetched, so the trusted side never
holds more), ``MAX_GROWTH`` bytes more in the file and ``STATEMENT_SECONDS`` a statement.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

MAX_LENGTH = 1 << 20  # bytes of one string or blob
MAX_ANSWER = 4 << 20  # bytes of one statement's answer as it will cross the wire
MAX_GROWTH = 16 << 20  # bytes the worker's writes may add to the file
STATEMENT_SECONDS = 5.0
PRAGMAS = {"busy_timeout"}  # the one pragma ``lucyshop.store.immediate`` reads and sets
_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_INSERT,
    sqlite3.SQLITE_UPDATE,
    sqlite3.SQLITE_DELETE,
    sqlite3.SQLITE_TRANSACTION,
    sqlite3.SQLITE_SAVEPOINT,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
TRUSTED_TABLES = "trusted_"  # a served file's tables (and triggers) of the trusted side's own


class AnswerTooLarge(sqlite3.OperationalError):
    """The answer to one statement would be larger than the trusted side hands a sandbox."""


class ServedShop:
    """The trusted side's connection to ``path``, executing what the worker sends."""

    def __init__(self, path: Path, before: Callable[[int, str], None]) -> None:
        self.before = before
        self.statements: list[str] = []
        self.db = sqlite3.connect(path, isolation_level=None, timeout=5)
        self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
        self.db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        (pages,) = self.db.execute("PRAGMA page_count").fetchone()
        (page,) = self.db.execute("PRAGMA page_size").fetchone()
        self.db.execute(f"PRAGMA max_page_count = {pages + MAX_GROWTH // page}")
        self.db.set_authorizer(_authorize)
        self._stop = 0.0
        self.db.set_progress_handler(lambda: time.monotonic() > self._stop, 10_000)

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> dict:
        """Run one statement the worker sent, after ``before`` had its moment; the answer by
        value: column names, rows, lastrowid, rowcount, and whether a transaction is open."""
        if not isinstance(sql, str) or not isinstance(parameters, (list, tuple, dict)):
            raise TypeError("a statement is a string and its parameters a sequence or a dict")
        self.statements.append(sql[:200])
        self.before(len(self.statements), sql)
        self._stop = time.monotonic() + STATEMENT_SECONDS
        cursor = self.db.execute(sql, parameters)
        rows, size = [], 0
        for row in cursor:  # one row at a time: at most one value past the bound is held
            size += sum(map(_size, row))
            if size > MAX_ANSWER:
                cursor.close()
                raise AnswerTooLarge(
                    f"the served shop stopped reading the answer to {sql[:80]!r} at"
                    f" {MAX_ANSWER >> 20} MiB: the trusted side hands a sandbox no more"
                    " from one statement (select fewer rows or smaller values)"
                )
            rows.append(list(row))
        return {
            "columns": [column[0] for column in cursor.description or ()],
            "rows": rows,
            "lastrowid": cursor.lastrowid,
            "rowcount": cursor.rowcount,
            "in_transaction": self.db.in_transaction,
        }

    def close(self) -> None:
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self.db.close()


def _size(value: Any) -> int:
    """Bytes ``value`` takes in an answer on the wire (JSON; bytes as base64)."""
    if isinstance(value, str):
        return len(json.dumps(value))
    if isinstance(value, bytes):
        return 4 * (len(value) + 2) // 3 + 16
    return 24


def _authorize(
    action: int, first: str | None, _second: str | None, database: str | None, trigger: Any
) -> int:
    """Plain reads and writes of the shop's own tables; nothing that reaches another file,
    the schema, or the trusted side's records (``TRUSTED_TABLES``), read or written, except
    by a trigger of the trusted side's own (the worker can make none)."""
    if database not in (None, "main", "temp"):
        return sqlite3.SQLITE_DENY
    if isinstance(trigger, str) and trigger.startswith(TRUSTED_TABLES):
        return sqlite3.SQLITE_OK
    name = (first or "").lower()
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if name in PRAGMAS else sqlite3.SQLITE_DENY
    if action != sqlite3.SQLITE_FUNCTION and name.startswith(("sqlite_", TRUSTED_TABLES)):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY
