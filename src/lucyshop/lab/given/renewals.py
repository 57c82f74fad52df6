"""Where exercise 5's lease renewals are recorded: given to the student, not part of the answer.

``prepare_renewals(db)`` adds ``lease_renewals(seq, work_id, generation, progress,
progressed_at, renewed_at, expires)`` to a shop, one row per granted renewal: ``seq`` numbers
the rows; ``progress`` is the count ``renew`` was given; ``progressed_at`` is when this
execution's ``progress`` last grew; ``renewed_at`` is the renewal's ``now``; ``expires`` is the
lease's new end.
"""

from __future__ import annotations

import sqlite3

# One row per granted renewal.
RENEWAL_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE lease_renewals(
            seq           INTEGER PRIMARY KEY AUTOINCREMENT,
            work_id       INTEGER NOT NULL REFERENCES work(work_id),
            generation    INTEGER NOT NULL,
            progress      INTEGER NOT NULL CHECK (progress >= 0),
            progressed_at REAL NOT NULL,  -- when this execution's progress last advanced
            renewed_at    REAL NOT NULL,
            expires       REAL NOT NULL
        )""",
    ),
}


def prepare_renewals(db: sqlite3.Connection) -> None:
    """Add the ``lease_renewals`` table to a shop opened with ``open_worker_shop`` (idempotent)."""
    db.migrate("renewals", RENEWAL_MIGRATIONS)
