"""The shop's SQLite file: one connection per process, explicit transactions, versioned schema.

The chapters speak to a shop as ``db``: ``db.immediate()``, ``db.migrate(line, migrations)``
and ``db.connection`` (the plain connection a current-holder check reads through). Here the
shop *is* its connection, so ``db.connection`` is ``db`` itself.

Every durable decision in the kit is made inside ``db.immediate()``: ``BEGIN IMMEDIATE`` takes
the write lock *before* the first read, so what a transaction reads cannot change under it
before it writes. That is what makes a claim, a fence check and the write it guards atomic.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_MS = 5000
RETRY_S = 0.002  # a waiting writer retries BEGIN IMMEDIATE about this often, whatever its age

Migrations = Mapping[int, Sequence[str]]


class Transactions:
    """The book's interface to a shop: ``immediate()``, ``migrate(...)`` and ``connection``.

    Mixed into the kit's connection and into the sandbox's stand-in for one, so that both
    answer the calls the chapters make with one implementation.
    """

    busy_timeout_ms: int = BUSY_TIMEOUT_MS

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection to read and write through: this shop is its own connection."""
        return self  # type: ignore[return-value]

    @contextmanager
    def immediate(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: commit on success, roll back and re-raise on any exception.

        Nesting is refused rather than silently joined: a caller who thinks they own a
        transaction that is really someone else's would commit half of their work.
        """
        db: sqlite3.Connection = self  # type: ignore[assignment]
        if db.in_transaction:
            raise RuntimeError("immediate() is already inside a transaction; nesting is refused")
        _begin_immediate(db)
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def migrate(self, line: str, migrations: Migrations) -> int:
        """Apply each version of ``line`` above the recorded one, each in its own transaction.

        Idempotent: a second call applies nothing. A file recorded at a version this code does
        not know is refused, because older code writing to a newer schema loses data quietly.
        Returns the version the file is at afterwards.
        """
        db: sqlite3.Connection = self  # type: ignore[assignment]
        if not isinstance(line, str) or not line:
            raise ValueError("a migration line needs a non-empty name")
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in migrations):
            raise ValueError(f"migration versions are whole numbers from 1: {list(migrations)!r}")
        for version, statements in migrations.items():
            if not isinstance(statements, (list, tuple)) or not all(
                isinstance(statement, str) for statement in statements
            ):
                raise ValueError(
                    f"version {version} of {line!r} is a tuple or list of SQL statements,"
                    f" not {statements!r}"
                )
        newest = max(migrations, default=0)
        current = schema_version(db, line)
        if current > newest:
            raise RuntimeError(
                f"{line!r} schema is at version {current}, newer than this code knows "
                f"({newest}); refusing to open it"
            )
        for version in sorted(v for v in migrations if v > current):
            with self.immediate():
                # Re-read under the write lock: another process may have migrated meanwhile.
                if schema_version(db, line) >= version:
                    continue
                for statement in migrations[version]:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_versions(line, version) VALUES (?, ?)"
                    " ON CONFLICT(line) DO UPDATE SET version = excluded.version",
                    (line, version),
                )
        return max(current, newest)


class ShopConnection(Transactions, sqlite3.Connection):
    """A shop: a connection that remembers its busy timeout, which ``immediate`` spends
    waiting fairly for the write lock."""


def connect(path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> ShopConnection:
    """Open a shop file in autocommit mode (no hidden transactions), WAL, synchronous=FULL."""
    db = sqlite3.connect(
        str(path), isolation_level=None, timeout=busy_timeout_ms / 1000, factory=ShopConnection
    )
    db.busy_timeout_ms = int(busy_timeout_ms)
    db.row_factory = sqlite3.Row
    try:
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error:
        db.close()  # a corrupt or foreign file: do not leave the handle open
        raise
    return db


class WriteLockTimeout(sqlite3.OperationalError):
    """No write lock within the connection's busy timeout: another writer held it all along."""


def _begin_immediate(db: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, waiting fairly for the write lock up to the busy timeout.

    SQLite's own busy handler sleeps longer the longer a writer has waited (up to 100 ms a
    try), so under contention the oldest waiter keeps losing the lock to newcomers that retry
    sooner, and some waited past their timeout (``database is locked`` with 4 processes).
    Here every waiter retries after a short random sleep (``RETRY_S``, jittered so waiters do
    not move in step) however long it has waited: no writer is starved for having waited.
    Past the connection's ``busy_timeout`` it raises ``WriteLockTimeout``, which says so.
    """
    budget_ms = getattr(db, "busy_timeout_ms", None)
    if budget_ms is None:  # a connection from elsewhere: read what it was given
        budget_ms = int(db.execute("PRAGMA busy_timeout").fetchone()[0])
    deadline = time.monotonic() + budget_ms / 1000
    db.execute("PRAGMA busy_timeout = 0")  # each try fails at once; the waiting happens here
    try:
        tries = 0
        while True:
            tries += 1
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as error:
                if error.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise WriteLockTimeout(
                    f"database is locked: no write lock within the busy timeout of {budget_ms}"
                    f" ms ({tries} tries); another connection held a write transaction throughout"
                )
            time.sleep(min(left, RETRY_S * random.uniform(0.5, 1.5)))
    finally:
        db.execute(f"PRAGMA busy_timeout = {budget_ms}")


def schema_version(db: sqlite3.Connection, line: str) -> int:
    """The highest version of migration line ``line`` recorded in this file (0 if none)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS schema_versions("
        " line TEXT PRIMARY KEY, version INTEGER NOT NULL CHECK (version >= 0))"
    )
    row = db.execute("SELECT version FROM schema_versions WHERE line = ?", (line,)).fetchone()
    return 0 if row is None else int(row[0])
