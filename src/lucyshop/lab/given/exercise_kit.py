"""What the exercise answers are given: the chapter they use, and reading a shop back.

``learner/exercises.py`` and ``solutions/exercises.py`` both use these, so that an answer is
only its idea: which chapter file (``load_chapter``), what a refused write said (``attempt``), and
the rows a shop holds afterwards (``rows``, ``lease_row``, ``outcome_row``, ``transcript_rows``),
a worker's turn held between two writes (``HeldTurn``) and an address nobody answers
(``dead_endpoint``, on a port from ``free_port``). The tests take these two from here too.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from lucyshop import chosen_impl
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import CHAPTER, impl_path, load_impl
from lucyshop.store import connect

_LOADED: dict[Path, ModuleType] = {}
WAIT_SECONDS = 30.0  # the longest a held turn waits to be released


def chapter_path(answers: str | os.PathLike) -> Path:
    """The chapter file an exercises file uses: ``$LEASES_IMPL``, else ``ch13_leases.py`` beside
    it."""
    return impl_path(chosen_impl(otherwise=Path(answers).with_name(CHAPTER)))


def load_chapter(answers: str | os.PathLike) -> ModuleType:
    """The chapter-13 functions of ``chapter_path(answers)``, loaded once per process."""
    path = chapter_path(answers)
    if path not in _LOADED:
        _LOADED[path] = load_impl(path)
    return _LOADED[path]


def attempt(write: Callable[[], Any]) -> str:
    """``''`` when the write went through, ``'PermissionError: why'`` (or another error's name
    and message) when it did not. A stub's ``NotStarted`` is not an answer: it propagates."""
    try:
        write()
    except NotStarted:
        raise
    except Exception as error:  # noqa: BLE001 - returned as text, weighed by the caller
        return f"{type(error).__name__}: {error}"
    return ""


def rows(db: sqlite3.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    """The rows ``sql`` selects, as dicts."""
    return [dict(row) for row in db.execute(sql, args)]


def lease_row(db: sqlite3.Connection, work_id: int) -> dict[str, Any]:
    """The work item's ``assignment_leases`` row."""
    return rows(db, "SELECT * FROM assignment_leases WHERE work_id = ?", work_id)[0]


def outcome_row(db: sqlite3.Connection, work_id: int) -> dict[str, Any] | None:
    """The work item's outcome, or None while it has none. ``result`` is the text as stored:
    what ``finish`` was given, or the JSON of ``cancel``'s facts."""
    found = rows(db, "SELECT generation, status, result FROM outcomes WHERE work_id = ?", work_id)
    return found[0] if found else None


def transcript_rows(db: sqlite3.Connection, work_id: int) -> list[dict[str, Any]]:
    """The work item's transcript, oldest first, messages decoded."""
    return [
        {"seq": r["seq"], "generation": r["generation"], "message": json.loads(r["message"])}
        for r in db.execute("SELECT * FROM transcript WHERE work_id = ? ORDER BY seq", (work_id,))
    ]


class HeldTurn(threading.Thread):
    """A worker's turn on its own connection: ``work`` runs, then the turn is held until
    ``release`` before ``complete`` runs. What each returned or raised is kept in ``result``."""

    def __init__(
        self,
        shop: Path,
        work: Callable[[sqlite3.Connection], Any],
        complete: Callable[[sqlite3.Connection], dict[str, str]],
    ) -> None:
        super().__init__(daemon=True)
        self.shop, self.work, self.complete = shop, work, complete
        self.ready, self.release = threading.Event(), threading.Event()
        self.result: dict[str, Any] = {}

    def run(self) -> None:
        db = connect(self.shop)
        try:
            self.result["work"] = self.work(db)
            self.ready.set()
            if not self.release.wait(WAIT_SECONDS):
                self.result["error"] = "the turn was never released"
                return
            self.result["completion"] = self.complete(db)
        except BaseException as error:  # noqa: BLE001 - kept for the parent thread
            self.result["error"] = f"{type(error).__name__}: {error}"
            self.result["exception"] = error
        finally:
            self.ready.set()
            db.close()

    def finish_within(self, seconds: float) -> dict[str, Any]:
        self.join(seconds)
        if self.is_alive():
            raise TimeoutError(f"the worker's turn did not end within {seconds:g}s")
        if isinstance(self.result.get("exception"), NotStarted):
            raise self.result["exception"]
        return {k: v for k, v in self.result.items() if k != "exception"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def dead_endpoint() -> str:
    """An address nobody answers: a port that was free a moment ago, where nothing listens (a
    supplier, a model server or a database that is not there)."""
    return f"http://127.0.0.1:{free_port()}"
