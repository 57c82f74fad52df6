"""The renewer hook: a worker's lease renewed alongside its turns by the answers' own renewer.

Exercise 5 asks for ``renew`` and ``keep_renewing`` in an ``exercises.py``. The experiment's
worker roles (``worker.py``) run them when they are given ``--answers PATH``: this module loads
that file and runs its ``keep_renewing`` in a thread, on the thread's own connection, with a
log of every attempt (one JSON line each, flushed at once, so a SIGKILL loses none). In the
trusted side's run (``--sandboxed``, ``sandboxed.py``) the answers and that connection live in a
sandbox, and only the log is written here.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop.store import connect

MODULE = "ch13_exercises"
STOP_SECONDS = 30.0


def load_answers(path: str | Path) -> ModuleType:
    """The exercises file at ``path``, executed as module ``ch13_exercises``."""
    spec = importlib.util.spec_from_file_location(MODULE, Path(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def renewals(db: sqlite3.Connection, work_id: int) -> list[dict[str, Any]]:
    """The ``lease_renewals`` rows of one work item, oldest first."""
    return [
        dict(row)
        for row in db.execute(
            "SELECT generation, progress, progressed_at, renewed_at, expires FROM lease_renewals"
            " WHERE work_id = ? ORDER BY seq",
            (work_id,),
        )
    ]


def attempts(path: Path) -> list[dict[str, Any]]:
    """A renewer's log: one record per attempt, granted or refused."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


class Renewer(threading.Thread):
    """Runs ``answers.keep_renewing`` for ``held`` until ``stop()``; the turn sets ``progress``."""

    def __init__(
        self,
        answers: ModuleType,
        shop: Path,
        held: Any,
        *,
        ttl: float,
        interval: float,
        bound: float | None,
        log: Path,
        connect: Callable[[Path], Any] = connect,
    ) -> None:
        """``connect``: how the thread's connection to ``shop`` is made (where the answers run)."""
        super().__init__(daemon=True)
        self.answers, self.shop, self.held, self.log = answers, shop, held, log
        self.connect = connect
        self.ttl, self.interval, self.bound = ttl, interval, bound
        self.progress = 0
        self.stopped = threading.Event()
        self.refused: str | None = None

    def run(self) -> None:
        db = self.connect(self.shop)
        try:
            with self.log.open("a", encoding="utf-8") as log:

                def write_line(record: dict[str, Any]) -> None:
                    log.write(json.dumps(record) + "\n")
                    log.flush()

                self.refused = self.answers.keep_renewing(
                    db,
                    self.held,
                    ttl=self.ttl,
                    interval=self.interval,
                    bound=self.bound,
                    progress=lambda: self.progress,
                    stopped=self.stopped,
                    report=write_line,
                )
        finally:
            db.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join(STOP_SECONDS)
