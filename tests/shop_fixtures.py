"""The shop's test data and fixtures, each stated once for every suite.

- ``VANILLA``: the order most tests propose (six vanilla tubs, ``VANILLA_CENTS``).
- ``free_port()`` and ``dead_endpoint()``: a port that was free a moment ago, where nothing
  listens (a supplier, a model server or a database that is not there).
- ``supplier``: a real supplier process for one test, ``shared_supplier`` one for a whole
  test file (its tests only add to its ledger); both reject ``REJECTED_SKU``.
- ``held``: one work item claimed by ``till`` for 30 s, in whichever suite asks; the suite
  says how it claims (``claim_as``: the chapter's SQLite ``claim`` in tests/learner, exercise
  7's PostgreSQL one in tests/postgres).

``tests/conftest.py`` makes the fixtures available to every test; the data and helpers are
imported from here. ``tests/test_shop_fixtures.py`` fails when any of them is stated again.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lucyshop.lab.given.orders import VANILLA, VANILLA_CENTS
from lucyshop.lab.services.suppliers import RunningSupplier, supplier_process

__all__ = ["VANILLA", "VANILLA_CENTS"]  # the shop's order, from the lab's one statement of it

REJECTED_SKU = "oat-milk"  # the test suppliers refuse it: a conclusive REJECTED receipt


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def dead_endpoint() -> str:
    """An endpoint nobody listens on: a port that was free a moment ago."""
    return f"http://127.0.0.1:{free_port()}"


def running_supplier(directory: Path) -> Any:
    """``with running_supplier(directory) as supplier``: the tests' supplier process."""
    return supplier_process(directory, reject_skus=(REJECTED_SKU,))


@pytest.fixture
def supplier(tmp_path: Path) -> Iterator[RunningSupplier]:
    """A real supplier process (identity ``dairy``, its files in ``tmp_path``) for this test,
    ended after it."""
    with running_supplier(tmp_path) as running:
        yield running


@pytest.fixture(scope="module")
def shared_supplier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSupplier]:
    """One supplier process for a whole test file, for tests that only add to its ledger."""
    with running_supplier(tmp_path_factory.mktemp("supplier")) as running:
        yield running


@pytest.fixture
def held(add_work: Callable[..., int], claim_as: Callable[..., Any]) -> Any:
    """Work item 1 (session ``s1``), claimed by ``till`` for 30 s: where the tests of a
    holder's functions start. ``add_work`` and ``claim_as`` are the suite's own."""
    add_work()
    return claim_as("till", ttl=30)
