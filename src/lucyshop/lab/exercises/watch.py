"""What exercise 5's renewals did to the leases, seen by the measuring side itself.

A renewer's ``lease_renewals`` rows and its ``report=`` entries are what the answers say they
did: the answers write them, with times they choose. The lease row is what a replacement's
claim obeys. ``LeaseWatch`` reads every item's ``assignment_leases`` row on a connection of
its own, every ``every`` seconds by its own clock, and keeps each change of an item's
generation or expiry as ``[at, generation, expires]``: ``at`` is when the read began, so the
change was committed before it (and after the read before). The figures and conditions of
``renewal`` weigh these, never the answers' word.

Reads are bounded: at most ``MAX_ITEMS`` rows a read, rows of other types skipped, and a run
that changes more than ``MAX_CHANGES`` times is refused rather than kept.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable

MAX_ITEMS = 256  # a phase enqueues a few dozen items at most
MAX_CHANGES = 100_000  # a renewer every 50 ms over a full run makes a few thousand
STOP_SECONDS = 30.0
QUERY = (
    "SELECT work_id, generation, expires FROM assignment_leases"
    " WHERE typeof(work_id) = 'integer' AND typeof(generation) = 'integer'"
    " AND typeof(expires) IN ('integer', 'real') ORDER BY work_id LIMIT ?"
)

Change = list[float]  # [at, generation, expires]


class LeaseWatch(threading.Thread):
    """Watches one shop until ``stop()``: ``opener`` makes the connection (in the thread)."""

    def __init__(self, opener: Callable[[], sqlite3.Connection], every: float) -> None:
        super().__init__(daemon=True, name="lease-watch")
        self.opener, self.every = opener, every
        self.done = threading.Event()
        self.seen: dict[int, list[Change]] = {}
        self.changes = 0
        self.refused: str | None = None

    def run(self) -> None:
        try:
            db = self.opener()
        except (OSError, ValueError, sqlite3.Error) as error:
            self.refused = f"the shop could not be watched: {type(error).__name__}: {error}"
            return
        try:
            self._look(db)
            while not self.done.wait(self.every) and self.refused is None:
                self._look(db)
            self._look(db)  # the state the phase ended in
        finally:
            db.close()

    def _look(self, db: sqlite3.Connection) -> None:
        at = time.time()
        try:
            rows = db.execute(QUERY, (MAX_ITEMS,)).fetchall()
        except sqlite3.Error:  # a lock past the busy timeout: the next read sees the state
            return
        for work_id, generation, expires in rows:
            changes = self.seen.setdefault(work_id, [])
            if changes and changes[-1][1:] == [generation, expires]:
                continue
            if self.changes >= MAX_CHANGES:
                self.refused = f"the leases changed more than {MAX_CHANGES} times"
                return
            changes.append([at, generation, expires])
            self.changes += 1

    def end(self) -> None:
        """End the watch (its last read first), waiting at most ``STOP_SECONDS``."""
        self.done.set()
        self.join(STOP_SECONDS)

    def stop(self) -> dict[int, list[Change]]:
        """End the watch and return what it saw, by work id; RuntimeError if it could not
        watch, or did not stop within ``STOP_SECONDS``."""
        self.end()
        if self.is_alive():
            raise RuntimeError(f"the lease watch did not stop within {STOP_SECONDS:g} s")
        if self.refused is not None:
            raise RuntimeError(self.refused)
        return self.seen
