"""Exercise 7's shop on PostgreSQL: the schema, a claim's record, and loading the student's file.

Four tables, the SQLite chapter's in miniature. ``work`` is the queue; ``leases`` holds one
row per work item from the moment it is queued (generation 0, expired since 1970),
so a claim always updates, and locks, a row that exists; ``transcript`` and ``outcomes``
record the generation that wrote them. Every time in them is the server's
(``clock_timestamp()``): no worker's wall clock is ever written or compared.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

SCHEMA = """
CREATE TABLE work(
    work_id    serial PRIMARY KEY,
    session_id text NOT NULL,
    text       text NOT NULL,
    state      text NOT NULL DEFAULT 'pending'
               CHECK (state IN ('pending', 'running', 'finished'))
);
CREATE TABLE leases(
    work_id    integer PRIMARY KEY REFERENCES work,
    owner      text,
    generation integer NOT NULL DEFAULT 0,
    expires    timestamptz NOT NULL DEFAULT 'epoch'
);
CREATE TABLE transcript(
    seq        bigserial PRIMARY KEY,
    work_id    integer NOT NULL REFERENCES work,
    generation integer NOT NULL,
    message    jsonb NOT NULL,
    written    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE outcomes(
    work_id    integer PRIMARY KEY REFERENCES work,
    generation integer NOT NULL,
    status     text NOT NULL CHECK (status IN ('DONE', 'BLOCKED', 'CANCELED')),
    result     text NOT NULL,
    written    timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""

MODULE = "ch13_postgres"


@dataclass(frozen=True)
class PgClaim:
    """One execution's hold on one work item; ``expires`` is the server's time. A cache of the
    records, never the authority."""

    work_id: int
    session_id: str
    text: str
    owner: str
    generation: int
    expires: dt.datetime

    @property
    def worker_id(self) -> str:
        return f"{self.owner}#{self.generation}"


def connect(dsn: str) -> Any:
    """A connection in autocommit mode: each statement is its own transaction unless a
    ``with connection.transaction():`` block groups several."""
    import psycopg
    from psycopg.rows import dict_row

    return psycopg.connect(dsn, autocommit=True, row_factory=dict_row)


def create_shop(dsn: str) -> None:
    """Create the four tables (once per schema, before any worker connects)."""
    with connect(dsn) as connection, connection.transaction():
        connection.execute(SCHEMA)


def add_work(connection: Any, session_id: str, text: str) -> int:
    """Queue one assignment and its lease row (generation 0, already expired); its work id."""
    with connection.transaction():
        row = connection.execute(
            "INSERT INTO work(session_id, text) VALUES (%s, %s) RETURNING work_id",
            (session_id, text),
        ).fetchone()
        connection.execute("INSERT INTO leases(work_id) VALUES (%s)", (row["work_id"],))
    return row["work_id"]


def load_pg_impl(chapter_file: str | Path) -> ModuleType:
    """The ``ch13_postgres.py`` beside a chapter file (``learner/`` or ``solutions/``),
    executed fresh as module ``ch13_postgres``."""
    path = Path(chapter_file).resolve().with_name(f"{MODULE}.py")
    if not path.is_file():
        raise FileNotFoundError(f"no {MODULE}.py beside {chapter_file}: exercise 7 lives there")
    spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
