"""Chapter 8's work queue: admission with idempotent source ids,
and a state machine the database enforces.

Work moves ``pending -> running -> finished`` and nowhere else. The rule lives in a trigger,
not in Python, so no caller (a student's function included) can move finished work back.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Literal

from lucyshop import validate
from lucyshop.store import immediate
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


@dataclass(frozen=True)
class Admission:
    """What admission decided; ``work_id`` is set for accepted and duplicate work."""

    status: Status
    work_id: int | None = None
    reason: str = ""


class WorkQueue:
    """Admits work into the ``work`` table of one shop file."""

    def __init__(self, db: sqlite3.Connection, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self.db = db
        self.capacity = capacity

    def admit(self, source_id: str, session_id: str, text: str) -> Admission:
        """Accept new work once per source id.

        The same source with the same content is a ``duplicate`` (a retried delivery); the
        same source with other content is a ``conflict`` (two different requests claiming
        one identity). Invalid input and a full queue are ``refused`` and write nothing.
        """
        problem = _invalid(source_id, session_id, text)
        if problem:
            return Admission("refused", reason=problem)
        with immediate(self.db):
            row = self.db.execute(
                "SELECT work_id, session_id, text FROM work WHERE source_id = ?", (source_id,)
            ).fetchone()
            if row is not None:
                same = (row["session_id"], row["text"]) == (session_id, text)
                if same:
                    return Admission("duplicate", row["work_id"])
                return Admission("conflict", row["work_id"], "source id already holds other work")
            waiting = self.db.execute(
                "SELECT count(*) FROM work WHERE state != 'finished'"
            ).fetchone()[0]
            if waiting >= self.capacity:
                return Admission("refused", reason=f"queue is at capacity ({self.capacity})")
            cursor = self.db.execute(
                "INSERT INTO work(source_id, session_id, text, created) VALUES (?, ?, ?, ?)",
                (source_id, session_id, text, time.time()),
            )
            return Admission("accepted", int(cursor.lastrowid))

    def get(self, work_id: int) -> dict | None:
        row = self.db.execute("SELECT * FROM work WHERE work_id = ?", (work_id,)).fetchone()
        return None if row is None else dict(row)

    def counts(self) -> dict[str, int]:
        """Work items per state, every state present."""
        counts = {"pending": 0, "running": 0, "finished": 0}
        for state, n in self.db.execute("SELECT state, count(*) FROM work GROUP BY state"):
            counts[state] = n
        return counts


def _invalid(source_id: object, session_id: object, text: object) -> str:
    """Why this admission is refused, or "": ids are labels (no control characters), text is
    free text; each within its limit."""
    try:
        validate.label(source_id, "source_id", most=MAX_ID)
        validate.label(session_id, "session_id", most=MAX_ID)
        validate.text(text, "text", most=MAX_TEXT)
    except ValueError as problem:
        return str(problem)
    return ""
