"""Real model turns, one test at a time across ``make test``'s parallel workers.

The measured runs (the Part A experiment's quick run, exercises 5 and 6) time the turns they
generate and size their leases from them: a second model generating on the other core would
stretch both. An xdist worker takes the lock itself. A ``make check`` run that a test starts
runs its own pytest, which takes the lock only where the test handed it the lock's path
(``ENV``), and then only around the measured runs: the rest of that run goes on beside the
other measured runs.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lucyshop.lab.services.processes import wait_until

WAIT = 900.0  # seconds: longer than any one measured run the lock is held for
POLL = 0.2


ENV = "CH13_TEST_MODEL_LOCK"  # the lock file a test hands to the make check run it starts


def lock_path(request: pytest.FixtureRequest) -> Path | None:
    """The run's lock file (beside the workers' temporary directories); None outside a worker,
    unless the test that started this pytest handed one down."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    if not hasattr(request.config, "workerinput"):  # not an xdist worker: nothing to share
        return None
    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    return factory.getbasetemp().parent / "model-turns.lock"


@contextmanager
def one_model_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the run's model lock while the block runs."""
    path = lock_path(request)
    if path is None:
        yield
        return
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
