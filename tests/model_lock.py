"""Real model turns, one test at a time across ``make test``'s parallel workers.

The measured runs (the Part A experiment's quick run, exercises 5 and 6) time the turns they
generate and size their leases from them: a second model generating on the other core would
stretch both. Only an xdist worker takes the lock. A check that a test starts runs its own
pytest, which must never wait for a lock its parent holds.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lucyshop.lab.processes import wait_until

WAIT = 900.0  # seconds: longer than any one measured run the lock is held for
POLL = 0.2


@contextmanager
def one_model_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the run's model lock (a file beside the workers' temporary directories)."""
    if not hasattr(request.config, "workerinput"):  # not an xdist worker: nothing to share
        yield
        return
    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    path = factory.getbasetemp().parent / "model-turns.lock"
    with open(path, "a") as handle:

        def taken() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        wait_until(taken, timeout=WAIT, interval=POLL, what=f"the model lock {path}")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
