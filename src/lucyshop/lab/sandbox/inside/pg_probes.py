"""What the trusted side does inside a worker for exercise 7 (``spec/postgres``), where the
student's ``ch13_postgres.py`` runs: open a connection of the worker's own, read and shift
the worker's clock, run statements on the worker's connection, and race claims from
several threads.

Nothing here is trusted: the student's code shares this process and may rewrite it. The
tests assert on what they read back from the database on their own connection; a worker that
lies only lies about its own student's functions.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

RACE_SECONDS = 60.0


def connect(dsn: str) -> Any:
    """A connection of the worker's own, as the student's functions are given one
    (``lucyshop.lab.given.pg_shop.connect``: autocommit, rows as dicts)."""
    from lucyshop.lab.given import pg_shop

    return pg_shop.connect(dsn)


def clock() -> float:
    """The worker's wall clock (libfaketime may shift it)."""
    return time.time()


def shift(seconds: float) -> float:
    """Shift this worker's wall clock by ``seconds`` from now on, in a worker started with
    libfaketime preloaded and its cache off (``lucyshop.lab.skew.shifted_env``): it reads
    ``$FAKETIME`` at every call. The clock it then reads."""
    os.environ["FAKETIME"] = f"{seconds:+.3f}"
    return time.time()


def execute(connection: Any, statement: str) -> None:
    """One statement on the worker's connection (``SET lock_timeout``, ``BEGIN``, ``COMMIT``)."""
    connection.execute(statement)


def close(connection: Any) -> None:
    connection.close()


def race(claim: Any, dsn: str, owners: list[str], ttl: float) -> dict[str, list]:
    """Each owner claims until ``claim`` returns None, each on a connection and in a thread of
    its own, all at once: what each took (``[owner, work_id, generation]``) and the errors."""
    taken: list[list] = []
    errors: list[str] = []

    def worker(owner: str) -> None:
        try:
            with connect(dsn) as own:
                while (held := claim(own, owner, ttl=ttl)) is not None:
                    taken.append([owner, held.work_id, held.generation])
        except Exception as error:  # noqa: BLE001 - the test asserts there were none
            errors.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=worker, args=(owner,), daemon=True) for owner in owners]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + RACE_SECONDS
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        errors.append(f"a claiming thread was still running after {RACE_SECONDS:g} s")
    return {"taken": taken, "errors": errors}
