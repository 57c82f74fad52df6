"""Chapter 8's work queue: admission with idempotent source ids,
and a state machine the database enforces.

Work moves ``pending -> running -> finished`` and nowhere else. The rule lives in a trigger,
not in Python, so no caller (a student's function included) can move finished work back.
"""

from __future__ import annotations

import time
from typing import Literal

from lucyshop import validate
from lucyshop.store import ShopConnection
from lucyshop.validate import MAX_ID, MAX_TEXT

DEFAULT_CAPACITY = 10_000

QUEUE_MIGRATIONS = {
    1: (
        """CREATE TABLE work(
            work_id    INTEGER PRIMARY KEY AUTOINCREMENT,
            source_id  TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            text       TEXT NOT NULL,
            state      TEXT NOT NULL DEFAULT 'pending'
                       CHECK (state IN ('pending', 'running', 'finished')),
            worker_id  TEXT,
            created    REAL NOT NULL
        )""",
        "CREATE INDEX work_by_state ON work(state, work_id)",
        # The only moves: pending -> running, running -> finished. Staying in a state is
        # allowed (a takeover rewrites worker_id of running work); anything else aborts.
        (
            """CREATE TRIGGER work_state_moves BEFORE UPDATE OF state ON work
           WHEN NOT (OLD.state = NEW.state
                     OR (OLD.state = 'pending' AND NEW.state = 'running')
                     OR (OLD.state = 'running' AND NEW.state = 'finished'))
           BEGIN SELECT RAISE(ABORT, """
            "'work state may only move pending -> running -> finished'); END"
        ),
        """CREATE TRIGGER work_finished_is_final BEFORE UPDATE ON work
           WHEN OLD.state = 'finished'
           BEGIN SELECT RAISE(ABORT, 'finished work is final'); END""",
    ),
}

Status = Literal["accepted", "duplicate", "conflict", "refused"]


class WorkQueue:
    """Admits work into the ``work`` table of one shop file (``store``, the shop itself)."""

    def __init__(self, store: ShopConnection, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self.store = store
        self.capacity = capacity

    def admit(self, source_id: str, session_id: str, text: str) -> Status:
        """Accept new work once per source id, and say how it went.

        ``accepted``: new work. The same source with the same content is a ``duplicate`` (a
        retried delivery); the same source with other content is a ``conflict`` (two different
        requests claiming one identity). Invalid input and a full queue are ``refused`` and
        write nothing; ``refusal(...)`` says why. The work's id is the row's ``work_id``, read
        by its ``source_id``.
        """
        if refusal(source_id, session_id, text):
            return "refused"
        with self.store.immediate() as connection:
            row = connection.execute(
                "SELECT session_id, text FROM work WHERE source_id = ?", (source_id,)
            ).fetchone()
            if row is not None:
                same = (row["session_id"], row["text"]) == (session_id, text)
                return "duplicate" if same else "conflict"
            waiting = connection.execute(
                "SELECT count(*) FROM work WHERE state != 'finished'"
            ).fetchone()[0]
            if waiting >= self.capacity:
                return "refused"
            connection.execute(
                "INSERT INTO work(source_id, session_id, text, created) VALUES (?, ?, ?, ?)",
                (source_id, session_id, text, time.time()),
            )
            return "accepted"

    def get(self, work_id: int) -> dict | None:
        row = self.store.execute("SELECT * FROM work WHERE work_id = ?", (work_id,)).fetchone()
        return None if row is None else dict(row)

    def counts(self) -> dict[str, int]:
        """Work items per state, every state present."""
        counts = {"pending": 0, "running": 0, "finished": 0}
        for state, n in self.store.execute("SELECT state, count(*) FROM work GROUP BY state"):
            counts[state] = n
        return counts


def refusal(source_id: object, session_id: object, text: object) -> str:
    """Why admitting this would be refused for its input, or "": ids are labels (no control
    characters), text is free text; each within its limit."""
    try:
        validate.label(source_id, "source_id", most=MAX_ID)
        validate.label(session_id, "session_id", most=MAX_ID)
        validate.text(text, "text", most=MAX_TEXT)
    except ValueError as problem:
        return str(problem)
    return ""
