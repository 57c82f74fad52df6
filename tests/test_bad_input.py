"""Bad input, one row each: the clear error it gets, and a read-back proving nothing was written.

Every row runs against a fresh shop that holds one claimed assignment with an approved order,
one finished assignment and one pending one, beside a real supplier process. Before and after
the bad call the test reads back every table the call could touch (work, leases, transcript,
outcomes, orders, the spending account) and the supplier's own ledger file; they must be equal,
except where a row names the one change that is the correct answer (an order left UNKNOWN,
its reservation kept, when the supplier answers garbage or nothing at all).
"""

from __future__ import annotations

import http.client
import json
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from lucyshop import approval
from lucyshop.lab.loader import MODULE, ImplementationError, load_impl
from lucyshop.store import connect
from lucyshop.supplier import (
    MAX_BODY_BYTES,
    SupplierClient,
    SupplierUnavailable,
    ledger_orders,
    supplier_process,
)

OPERATOR = "lucy"
POLICY = approval.SpendingPolicy(
    frozenset({OPERATOR}), total_cents=10_000, automatic_order_cents=5_000
)
VANILLA = {"sku": "vanilla-tub", "quantity": 6, "unit_cents": 450}
LEASES = load_impl("solutions")
TABLES = (
    "work",
    "assignment_leases",
    "transcript",
    "outcomes",
    "assistant_orders",
    "spending_account",
)


# ------------------------------------------------------------------ the world each row runs in


@dataclass
class World:
    tmp: Path
    path: Path
    db: sqlite3.Connection
    held: Any  # ann's live claim on the first assignment
    order: dict[str, Any]  # its approved order, 2700 cents reserved
    finished: int  # an assignment bob finished
    pending: int  # an assignment nobody has claimed
    supplier: Any  # the real supplier process
    garbage: str  # endpoint of a server that answers anything but JSON
    hanging: str  # endpoint of a server that accepts and never answers

    def read_back(self) -> dict[str, Any]:
        rows = {
            t: [tuple(r) for r in self.db.execute(f"SELECT * FROM {t} ORDER BY rowid")]
            for t in TABLES
        }
        return rows | {"ledger": ledger_orders(self.supplier.database)}


class GarbageHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self) -> None:
        if length := int(self.headers.get("Content-Length") or 0):
            self.rfile.read(length)
        body = b"<html>certainly, your order</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def supplier(tmp_path_factory):
    with supplier_process(tmp_path_factory.mktemp("supplier")) as running:
        yield running


@pytest.fixture(scope="module")
def garbage() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), GarbageHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def hanging() -> Iterator[str]:
    """A socket that listens and never accepts: the kernel completes the connect, nobody answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def world(tmp_path, supplier, garbage, hanging) -> Iterator[World]:
    path = tmp_path / "shop.db"
    db, queue = LEASES.open_worker_shop(path)
    first = LEASES.enqueue(queue, "bad-1", "session-a", "order six tubs of vanilla")
    finished = LEASES.enqueue(queue, "bad-2", "session-b", "say hello")
    pending = LEASES.enqueue(queue, "bad-3", "session-c", "order more next week")
    held = LEASES.claim(db, "ann", ttl=600)
    order = approval.propose(db, held, supplier=supplier.identity, proposal=VANILLA)
    order = approval.approve(
        db, order["order_id"], actor=OPERATOR, digest=order["digest"], policy=POLICY
    )
    done = LEASES.claim(db, "bob", ttl=600)
    LEASES.finish(db, done, "DONE", {"said": "hello"})
    assert (held.work_id, done.work_id) == (first, finished)
    try:
        yield World(tmp_path, path, db, held, order, finished, pending, supplier, garbage, hanging)
    finally:
        db.close()


# ------------------------------------------------------------------ helpers the rows use


class HTTPRefusal(Exception):
    """A status of 400 or more from the supplier, as an exception so the table reads one way."""


def raw(
    endpoint: str, method: str, path: str, body: bytes | None = None, *, length: int | None = None
) -> Any:
    """One hand-built request; ``length`` announces a body that is never sent
    (only the headers go)."""
    parts = urlsplit(endpoint)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        if body is not None or length is not None:
            connection.putheader("Content-Length", str(len(body) if length is None else length))
        connection.endheaders(body)
        response = connection.getresponse()
        data = json.loads(response.read())
    finally:
        connection.close()
    if response.status >= 400:
        raise HTTPRefusal(f"{response.status}: {data.get('error')}")
    return data


def proposal(**changes: Any) -> dict[str, Any]:
    return {k: v for k, v in (VANILLA | changes).items() if v is not ...}


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """Run ``call`` (which must raise) and fail if it took longer than ``seconds``."""
    started = time.monotonic()
    try:
        return call()
    finally:
        took = time.monotonic() - started
        assert took < seconds, f"took {took:.2f}s, more than {seconds}s"


def locked(w: World, call: Callable[[sqlite3.Connection], Any]) -> Any:
    """Another connection holds the write lock for longer than ``call``'s 100 ms busy timeout."""
    other = connect(w.path)
    impatient = connect(w.path, busy_timeout_ms=100)
    other.execute("BEGIN IMMEDIATE")
    try:
        return within(3, lambda: call(impatient))
    finally:
        other.execute("ROLLBACK")
        other.close()
        impatient.close()


def corrupt(w: World) -> Any:
    path = w.tmp / "corrupt.db"
    garbage = b"this is not a database, only bytes\x00\xff" * 200
    path.write_bytes(garbage)
    try:
        return approval.open_shop(path)
    finally:
        assert path.read_bytes() == garbage  # read back: the file is as it was
        assert not (w.tmp / "corrupt.db-wal").exists()


def unchanged_modules(call: Callable[[], Any]) -> Any:
    """The loader's failure leaves ``sys.modules`` as it was (no half-loaded implementation)."""
    before = sys.modules.get(MODULE)
    try:
        return call()
    finally:
        assert sys.modules.get(MODULE) is before


def broken_learner(w: World) -> Any:
    path = w.tmp / "broken_ch13_leases.py"
    path.write_text(
        '"""A learner file with a typo."""\n\ndef claim(db, owner, *, ttl=90, now=None:\n    pass\n'
    )
    return unchanged_modules(lambda: load_impl(path))


def order_left_unknown(before: dict[str, Any], after: dict[str, Any], w: World) -> None:
    """The one right change: the order is UNKNOWN (not sent for sure), its money still reserved."""
    columns = [d[0] for d in w.db.execute("SELECT * FROM assistant_orders").description]
    status, updated = columns.index("status"), columns.index("updated")
    (row_before,), (row_after,) = before["assistant_orders"], after["assistant_orders"]
    assert (row_before[status], row_after[status]) == ("APPROVED", "UNKNOWN")
    assert approval.account(w.db) == {
        "limit_cents": 100_000,
        "reserved_cents": 2700,
        "spent_cents": 0,
    }
    same = list(row_after)
    same[status], same[updated] = row_before[status], row_before[updated]
    assert tuple(same) == row_before
    assert {k: v for k, v in after.items() if k != "assistant_orders"} == {
        k: v for k, v in before.items() if k != "assistant_orders"
    }


def execute_against(endpoint_of: Callable[[World], str], timeout: float) -> Callable[[World], Any]:
    """execute() through a supplier that never gives an answer: it returns UNKNOWN, in time.

    execute catches the client's SupplierUnavailable itself (an unanswered send may still have
    reached the supplier), so this row's answer is a receipt, not an exception.
    """

    def act(w: World) -> Any:
        client = SupplierClient(endpoint_of(w), identity=w.supplier.identity, timeout=timeout)
        receipt = within(
            timeout * 2 + 1,
            lambda: approval.execute(w.db, w.held, w.order["order_id"], client, policy=POLICY),
        )
        assert receipt["status"] == "UNKNOWN", receipt
        return receipt

    return act


# ------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Bad:
    id: str
    act: Callable[[World], Any]
    error: (
        type[BaseException] | None
    )  # None: the call returns, and ``fragment`` is in what it returned
    fragment: str
    changed: Callable[[dict, dict, World], None] | None = (
        None  # the only change allowed; default none
    )


def claim_as(owner: Any) -> Callable[[World], Any]:
    return lambda w: LEASES.claim(w.db, owner, ttl=30)


def claim_for(ttl: Any) -> Callable[[World], Any]:
    return lambda w: LEASES.claim(w.db, "carol", ttl=ttl)


def finish_as(status: Any) -> Callable[[World], Any]:
    return lambda w: LEASES.finish(w.db, w.held, status, {})


def propose_this(bad: Any) -> Callable[[World], Any]:
    return lambda w: approval.propose(w.db, w.held, supplier=w.supplier.identity, proposal=bad)


TABLE = [
    # owner labels: claim refuses before it opens a transaction
    Bad("owner-empty", claim_as(""), ValueError, "owner must be"),
    Bad("owner-blank", claim_as("  "), ValueError, "owner must be"),
    Bad("owner-with-hash", claim_as("a#b"), ValueError, "without '#'"),
    Bad("owner-int", claim_as(5), ValueError, "owner must be"),
    Bad("owner-none", claim_as(None), ValueError, "owner must be"),
    # leases
    *(
        Bad(
            f"ttl-{name}",
            claim_for(ttl),
            ValueError,
            "ttl must be finite, above 0 and at most 3600",
        )
        for name, ttl in (
            ("nan", float("nan")),
            ("inf", float("inf")),
            ("minus-inf", float("-inf")),
            ("zero", 0),
            ("negative", -1),
            ("3601", 3601),
            ("bool", True),
            ("string", "10"),
        )
    ),
    # transcript messages
    Bad(
        "message-nan",
        lambda w: LEASES.observe(w.db, w.held, {"x": float("nan")}),
        ValueError,
        "must be JSON",
    ),
    Bad("message-set", lambda w: LEASES.observe(w.db, w.held, {1, 2}), ValueError, "must be JSON"),
    Bad(
        "message-object",
        lambda w: LEASES.observe(w.db, w.held, object()),
        ValueError,
        "must be JSON",
    ),
    # outcome statuses
    *(
        Bad(
            f"status-{name}",
            finish_as(status),
            ValueError,
            "status is one of DONE, BLOCKED, CANCELED",
        )
        for name, status in (("lowercase-done", "done"), ("empty", ""), ("none", None))
    ),
    # proposals: the shop and the supplier share one validator
    *(
        Bad(f"proposal-{name}", propose_this(bad), ValueError, fragment)
        for name, bad, fragment in (
            ("missing-field", proposal(unit_cents=...), "exactly the fields"),
            ("extra-field", proposal(note="rush"), "exactly the fields"),
            ("quantity-0", proposal(quantity=0), "quantity must be a whole number from 1 to 1000"),
            (
                "quantity-1001",
                proposal(quantity=1001),
                "quantity must be a whole number from 1 to 1000",
            ),
            ("quantity-bool", proposal(quantity=True), "quantity must be"),
            ("sku-capitals", proposal(sku="Vanilla-Tub"), "sku must be lower-case"),
        )
    ),
    # operation ids, refused by the client before anything is sent ...
    Bad(
        "client-operation-empty",
        lambda w: w.supplier.client().lookup(""),
        ValueError,
        "an operation id is",
    ),
    Bad(
        "client-operation-spaces",
        lambda w: w.supplier.client().order("two words", VANILLA),
        ValueError,
        "an operation id is",
    ),
    Bad(
        "client-operation-129-chars",
        lambda w: w.supplier.client().lookup("a" * 129),
        ValueError,
        "an operation id is",
    ),
    # ... and by the server when a client sends them anyway
    Bad(
        "server-operation-empty",
        lambda w: raw(w.supplier.endpoint, "POST", "/orders/", json.dumps(VANILLA).encode()),
        HTTPRefusal,
        "400: an operation id",
    ),
    Bad(
        "server-operation-spaces",
        lambda w: raw(w.supplier.endpoint, "GET", "/orders/two%20words"),
        HTTPRefusal,
        "400: an operation id",
    ),
    Bad(
        "server-operation-129-chars",
        lambda w: raw(
            w.supplier.endpoint, "POST", "/orders/" + "a" * 129, json.dumps(VANILLA).encode()
        ),
        HTTPRefusal,
        "400: an operation id",
    ),
    # bodies
    Bad(
        "body-oversized",
        lambda w: raw(w.supplier.endpoint, "POST", "/orders/op-big", length=MAX_BODY_BYTES + 1),
        HTTPRefusal,
        f"413: the body is {MAX_BODY_BYTES + 1} bytes; the limit is {MAX_BODY_BYTES}",
    ),
    Bad(
        "body-malformed-json",
        lambda w: raw(w.supplier.endpoint, "POST", "/orders/op-bad", b'{"sku": "vanil'),
        HTTPRefusal,
        "400: the body is not JSON",
    ),
    Bad(
        "body-not-a-proposal",
        lambda w: raw(w.supplier.endpoint, "POST", "/orders/op-list", b"[1, 2]"),
        HTTPRefusal,
        "400: a proposal must be a JSON object",
    ),
    # suppliers that answer garbage, or nothing
    Bad(
        "supplier-garbage-order",
        lambda w: SupplierClient(w.garbage, identity="dairy", timeout=2).order(
            "op-garbage", VANILLA
        ),
        SupplierUnavailable,
        "garbage reply",
    ),
    Bad(
        "supplier-garbage-execute",
        execute_against(lambda w: w.garbage, 2.0),
        None,
        "the supplier did not confirm the order",
        changed=order_left_unknown,
    ),
    Bad(
        "supplier-hangs-lookup",
        lambda w: within(
            1.0, lambda: SupplierClient(w.hanging, identity="dairy", timeout=0.3).lookup("op-hang")
        ),
        SupplierUnavailable,
        "timed out",
    ),
    Bad(
        "supplier-hangs-execute",
        execute_against(lambda w: w.hanging, 0.3),
        None,
        "the supplier did not confirm the order",
        changed=order_left_unknown,
    ),
    # the database itself
    Bad(
        "database-locked-claim",
        lambda w: locked(w, lambda db: LEASES.claim(db, "carol", ttl=30)),
        sqlite3.OperationalError,
        "database is locked",
    ),
    Bad(
        "database-locked-observe",
        lambda w: locked(w, lambda db: LEASES.observe(db, w.held, {"text": "hi"})),
        sqlite3.OperationalError,
        "database is locked",
    ),
    Bad("database-corrupt-file", corrupt, sqlite3.DatabaseError, "file is not a database"),
    # choosing an implementation
    Bad(
        "impl-unknown-path",
        lambda w: unchanged_modules(lambda: load_impl(w.tmp / "no_such_file.py")),
        ImplementationError,
        "no implementation at",
    ),
    Bad(
        "impl-unknown-name",
        lambda w: unchanged_modules(lambda: load_impl("solution")),
        ImplementationError,
        "use 'learner', 'solutions' or the path",
    ),
    Bad("impl-syntax-error", broken_learner, ImplementationError, "does not compile: line 3"),
    # cancel: only an operator, only real, unfinished work
    Bad(
        "cancel-by-non-operator",
        lambda w: LEASES.cancel(
            w.db, w.held.work_id, actor="ann", policy=POLICY, reason="changed my mind"
        ),
        PermissionError,
        "'ann' is not an operator",
    ),
    Bad(
        "cancel-unknown-work",
        lambda w: LEASES.cancel(w.db, 999, actor=OPERATOR, policy=POLICY, reason="typo"),
        PermissionError,
        "there is no work 999",
    ),
    Bad(
        "cancel-finished-work",
        lambda w: LEASES.cancel(w.db, w.finished, actor=OPERATOR, policy=POLICY, reason="too late"),
        PermissionError,
        "is already finished",
    ),
    Bad(
        "cancel-without-reason",
        lambda w: LEASES.cancel(w.db, w.pending, actor=OPERATOR, policy=POLICY, reason="  "),
        ValueError,
        "a cancellation needs a reason",
    ),
]


def test_the_table_is_at_least_thirty_rows_with_distinct_names():
    assert len(TABLE) >= 30
    assert len({row.id for row in TABLE}) == len(TABLE)


@pytest.mark.parametrize("bad", TABLE, ids=[row.id for row in TABLE])
def test_bad_input_is_refused_clearly_and_writes_nothing(world, bad):
    before = world.read_back()

    if bad.error is None:
        said = json.dumps(bad.act(world))
    else:
        with pytest.raises(bad.error) as raised:
            bad.act(world)
        said = f"{type(raised.value).__name__}: {raised.value}"

    assert bad.fragment in said
    after = world.read_back()
    if bad.changed is None:
        assert after == before
    else:
        bad.changed(before, after, world)
    # and the shop still works: the holder can write, the pending assignment can be claimed
    LEASES.observe(world.db, world.held, {"text": "still here"})
    assert LEASES.claim(world.db, "dave", ttl=30).work_id == world.pending
