"""The shop's test data and fixtures, each stated once for every suite.

- ``VANILLA``: the order most tests propose (six vanilla tubs, ``VANILLA_CENTS``).
- ``free_port()`` and ``dead_endpoint()``: a port that was free a moment ago, where nothing
  listens (a supplier, a model server or a database that is not there); the lab's, which the
  exercise answers are given (``lucyshop.lab.given.exercise_kit``).
- ``garbage_supplier``: the endpoint of a server that answers like a supplier but never with a
  supplier's receipt (``GarbageHandler``).
- ``CHANGED_TABLES``: the shop's tables a claim, a fence or a recovery may change, which a
  test reads back before and after a call.
- ``supplier``: a real supplier process with an empty ledger and no faults for each test (one
  process for each pytest process, wiped before each test that asks for it: a process per
  test cost each test a start), ``shared_supplier`` one for a whole test file (its tests only
  add to its ledger); both reject ``REJECTED_SKU``.
- ``held``: one work item claimed by ``till`` for 30 s from now, so its holder is current
  while the test runs, in whichever suite asks; the suite says how it claims (``claim_as``:
  the chapter's SQLite ``claim`` at the real clock in spec/learner, exercise 7's PostgreSQL
  one at the server's clock in spec/postgres).
- ``pg_server``: one PostgreSQL server for the run (exercise 7's suite and the kit's own
  PostgreSQL tests).

It lives with the spec, what a hand-in is tested against; ``spec/conftest.py`` and
``tests/conftest.py`` load it as a plugin (once, whichever loads it first).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lucyshop.lab.given.exercise_kit import dead_endpoint, free_port
from lucyshop.lab.given.orders import VANILLA, VANILLA_CENTS
from lucyshop.lab.services.postgres import missing, postgres_server
from lucyshop.lab.services.suppliers import RunningSupplier, supplier_process

# the shop's order and a dead address, from the lab's one statement of each
__all__ = ["VANILLA", "VANILLA_CENTS", "dead_endpoint", "free_port"]

REJECTED_SKU = "oat-milk"  # the test suppliers refuse it: a conclusive REJECTED receipt
CHANGED_TABLES = (  # what a claim, a fence or a recovery may change
    "work",
    "assignment_leases",
    "transcript",
    "outcomes",
    "assistant_orders",
    "spending_account",
)


def running_supplier(directory: Path) -> Any:
    """``with running_supplier(directory) as supplier``: the tests' supplier process."""
    return supplier_process(directory, reject_skus=(REJECTED_SKU,))


@pytest.fixture(scope="session")
def _supplier_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningSupplier, dict[str, Any]]]:
    """The run's supplier process and the fault settings it started with, set up with the
    session's fixtures (before the first test that asks for it sets up its own, so make test's
    leftovers guard counts it with them)."""
    with running_supplier(tmp_path_factory.mktemp("supplier")) as running:
        yield running, running.set_faults(drop_next=0)  # every setting, as it started


@pytest.fixture
def supplier(_supplier_process: tuple[RunningSupplier, dict[str, Any]]) -> RunningSupplier:
    """A real supplier process (identity ``dairy``) with an empty ledger (order numbers start
    at 1 again) and its faults as it started: the run's process, wiped before each test that
    asks for it. Its ``/health`` counters run on across tests."""
    running, started = _supplier_process
    if running.proc.poll() is not None:
        raise RuntimeError("the tests' supplier process ended: a test before this one ended it")
    running.set_faults(**started)
    ledger = sqlite3.connect(running.database, timeout=10)
    with contextlib.closing(ledger), ledger:  # closed after the transaction commits
        ledger.execute("DELETE FROM orders")
    return running


@pytest.fixture(scope="module")
def shared_supplier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSupplier]:
    """One supplier process for a whole test file, for tests that only add to its ledger."""
    with running_supplier(tmp_path_factory.mktemp("supplier")) as running:
        yield running


class GarbageHandler(BaseHTTPRequestHandler):
    """Answers ``/orders/...`` like a supplier, never with a supplier's receipt: HTML to any
    path, and to the paths in ``replies`` a receipt of the wrong shape, another supplier's
    receipt or a 500."""

    protocol_version = "HTTP/1.1"
    html: ClassVar[tuple[int, bytes]] = (200, b"<html>certainly, your order</html>")
    replies: ClassVar[dict[str, tuple[int, bytes]]] = {
        "/orders/op-shape": (200, b'{"status": "ACCEPTED"}'),
        "/orders/op-other": (
            200,
            json.dumps(
                {
                    "operation": "op-other",
                    "status": "ACCEPTED",
                    "supplier": "bakery",
                    "order_number": 1,
                    "amount_cents": 1,
                    "reason": None,
                }
            ).encode(),
        ),
        "/orders/op-crash": (500, b'{"error": "database is locked"}'),
    }

    def answer(self) -> None:
        if length := int(self.headers.get("Content-Length") or 0):
            self.rfile.read(length)
        status, body = self.replies.get(self.path, self.html)
        self.send_response(status)
        self.send_header(
            "Content-Type", "text/html" if body.startswith(b"<") else "application/json"
        )
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def garbage_supplier() -> Iterator[str]:
    """The endpoint of a ``GarbageHandler`` server, for a whole test file (it keeps no state)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), GarbageHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One PostgreSQL server for the run: ``$LUCYSHOP_PG_DSN``, else an embedded one, stopped
    after. Without the ``pg`` extra every test that needs it skips, saying how to install it."""
    if reason := missing():
        pytest.skip(f"exercise 7 needs PostgreSQL: {reason}")
    with postgres_server() as server:
        yield server


@pytest.fixture
def held(add_work: Callable[..., int], claim_as: Callable[..., Any]) -> Any:
    """Work item 1 (session ``s1``), claimed by ``till`` for 30 s from now: where the tests of
    a holder's functions start. ``add_work`` and ``claim_as`` are the suite's own."""
    add_work()
    return claim_as("till", ttl=30)
