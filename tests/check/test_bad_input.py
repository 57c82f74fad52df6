"""Bad input, one row each: the clear error it gets, and a read-back proving nothing was written.

Every row runs against a fresh shop that holds one claimed assignment with an approved order,
one finished assignment and one pending one, beside a real supplier process. Before and after
the bad call the test reads back every table the call could touch (work, leases, transcript,
outcomes, orders, the spending account) and the supplier's own ledger file; they must be equal,
except where a row names the one change that is the correct answer (an order left UNKNOWN,
its reservation kept, when the supplier answers garbage or nothing at all).

The chapter's functions are called as the book calls them (a dict message, a text result, no
``now`` for ``observe`` and ``finish``); the reference's refusals beyond the book (a hostile
owner label, ttl or clock for ``claim``) have rows of their own here too.
"""

from __future__ import annotations

import http.client
import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from shop_fixtures import CHANGED_TABLES, VANILLA

from lucyshop import approval
from lucyshop.lab.given.orders import OPERATOR, POLICY
from lucyshop.lab.loader import MODULE, ImplementationError, load_impl
from lucyshop.queue import WorkQueue, refusal
from lucyshop.store import connect
from lucyshop.supplier import (
    MAX_BODY_BYTES,
    SupplierClient,
    SupplierUnavailable,
    ledger_orders,
)

LEASES = load_impl("solutions")


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
            for t in CHANGED_TABLES
        }
        return rows | {"ledger": ledger_orders(self.supplier.database)}


@pytest.fixture(scope="module")
def hanging() -> Iterator[str]:
    """A socket that listens and never accepts: the kernel completes the connect, nobody answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture
def world(tmp_path, shared_supplier, garbage_supplier, hanging) -> Iterator[World]:
    garbage = garbage_supplier
    supplier = shared_supplier
    path = tmp_path / "shop.db"
    db, queue = LEASES.open_worker_shop(path)
    first = LEASES.enqueue(queue, "bad-1", "session-a", "order six tubs of vanilla")
    finished = LEASES.enqueue(queue, "bad-2", "session-b", "say hello")
    pending = LEASES.enqueue(queue, "bad-3", "session-c", "order more next week")
    held = LEASES.claim(db, "ann", ttl=600)
    order = approval.propose(db, held, supplier=supplier.identity, proposal=VANILLA)
    order = approval.approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=POLICY)
    done = LEASES.claim(db, "bob", ttl=600)
    LEASES.finish(db, done, "DONE", "said hello")
    assert (held.work_id, done.work_id) == (first, finished)
    try:
        yield World(tmp_path, path, db, held, order, finished, pending, supplier, garbage, hanging)
    finally:
        db.close()


# ------------------------------------------------------------------ helpers the rows use


class HTTPRefusal(Exception):
    """A status of 400 or more from the supplier, as an exception so the table reads one way."""


def raw(
    endpoint: str,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    length: int | str | None = None,
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
            lambda: approval.execute(w.db, w.held, w.order["id"], client, policy=POLICY),
        )
        assert receipt["status"] == "UNKNOWN", receipt
        return receipt

    return act


class StatusRefusal(Exception):
    """``python -m lucyshop status`` exited 2 with a ``status:`` message and no traceback."""


NOW = 1_800_000_000.0  # the clock the status rows run at


def status_of(path: Path, *args: str) -> str:
    """Run the status command on ``path``; its screen, or StatusRefusal with its message.

    The screen must hold no raw control character, whatever the records hold.
    """
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "lucyshop", "status", str(path), "--now", str(NOW), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert path.read_bytes() == before, "the status report wrote to the shop"
    if done.returncode == 2:
        assert done.stderr.startswith("status: ") and "Traceback" not in done.stderr, done.stderr
        raise StatusRefusal(done.stderr.strip())
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    controls = [c for c in done.stdout if c != "\n" and not c.isprintable()]
    assert not controls, f"raw control characters reached the screen: {controls!r}"
    return done.stdout


def shop_copy(w: World, *changes: tuple[str, tuple]) -> Path:
    """A standalone copy of the world's shop (no WAL) with ``changes`` applied to the copy."""
    path = w.tmp / "copy.db"
    w.db.execute("VACUUM INTO ?", (str(path),))
    copy = sqlite3.connect(path)
    try:
        copy.execute("PRAGMA journal_mode = DELETE")
        for sql, params in changes:
            copy.execute(sql, params)
        copy.commit()
    finally:
        copy.close()
    return path


def status_after(*changes: tuple[str, tuple], args: tuple[str, ...] = ()) -> Callable[[World], Any]:
    return lambda w: status_of(shop_copy(w, *changes), *args)


def damaged(w: World) -> Any:
    """The work table's page overwritten mid-page, as a torn write or a lost -wal can leave it."""
    path = shop_copy(w)
    db = sqlite3.connect(path)
    (page_size,) = db.execute("PRAGMA page_size").fetchone()
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'work'").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start + 8 : start + page_size // 2] = b"\xa5" * (page_size // 2 - 8)
    path.write_bytes(bytes(data))
    return status_of(path)


def truncated(w: World) -> Any:
    path = shop_copy(w)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return status_of(path)


def not_a_shop(w: World) -> Any:
    path = w.tmp / "notes.db"
    path.write_bytes(b"plain text notes, not a database\n" * 100)
    return status_of(path)


def malformed_workers_file(w: World) -> Any:
    workers = w.tmp / "workers.json"
    workers.write_text('{"ann": "not a pid"}')
    return status_of(shop_copy(w), "--workers", str(workers))


def admit(source_id: Any, session_id: Any, text: Any = "hello") -> Callable[[World], Any]:
    """``enqueue`` of one delivery; its ValueError (the book's, which does not say why) is
    raised again with the queue's own reason (``queue.refusal``)."""

    def act(w: World) -> Any:
        try:
            return LEASES.enqueue(WorkQueue(w.db), source_id, session_id, text)
        except ValueError as error:
            raise ValueError(f"{error}: {refusal(source_id, session_id, text)}") from None

    return act


def cancel_with(**changes: Any) -> Callable[[World], Any]:
    arguments = {"actor": OPERATOR, "policy": POLICY, "reason": "stop"} | changes
    work_id = arguments.pop("work_id", None)
    return lambda w: LEASES.cancel(w.db, w.pending if work_id is None else work_id, **arguments)


def approve_with(**changes: Any) -> Callable[[World], Any]:
    """approve() of the world's order with one argument changed: refused before it is read."""

    def act(w: World) -> Any:
        arguments = {
            "order_id": w.order["id"],
            "actor": OPERATOR,
            "digest": w.order["digest"],
            "policy": POLICY,
        }
        return approval.approve(w.db, **(arguments | changes))

    return act


def propose_for(supplier: Any, **changes: Any) -> Callable[[World], Any]:
    return lambda w: approval.propose(
        w.db, w.held, supplier=supplier, proposal=proposal(quantity=2), **changes
    )


def post_json(text: bytes, path: str = "/orders/op-odd") -> Callable[[World], Any]:
    method = "PUT" if path == "/faults" else "POST"
    return lambda w: raw(w.supplier.endpoint, method, path, text)


def announce(length: str) -> Callable[[World], Any]:
    return lambda w: raw(w.supplier.endpoint, "POST", "/orders/op-odd", length=length)


OWNER_RULE = "owner must be a non-empty label of at most 100 characters without '#' or control"
NOW_RULE = "now must be a time from 0 to 4102444800 seconds since 1970 (the year 2100)"


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
    return lambda w: LEASES.finish(w.db, w.held, status, "a result")


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
            "ttl must be a finite number of seconds above 0 and at most 3600",
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
            ("10**400", 10**400),
        )
    ),
    # transcript messages
    Bad(
        "message-nan",
        lambda w: LEASES.observe(w.db, w.held, {"x": float("nan")}),
        ValueError,
        "not JSON compliant",
    ),
    # outcome statuses
    *(
        Bad(
            f"status-{name}",
            finish_as(status),
            ValueError,
            "status is one of DONE, BLOCKED, CANCELED",
        )
        for name, status in (
            ("lowercase-done", "done"),
            ("empty", ""),
            ("an-order-status", "ACCEPTED"),
        )
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
        "a cancellation's reason must be non-empty text",
    ),
]


ROUND_TWO = [
    # a trailing newline passes a "$"-anchored pattern: every validated field is fully matched
    Bad(
        "sku-trailing-newline", propose_this(proposal(sku="vanilla-tub\n")), ValueError, "sku must"
    ),
    Bad(
        "server-rejected-sku-trailing-newline",
        post_json(json.dumps(proposal(sku="banned-tub\n")).encode(), "/orders/op-banned"),
        HTTPRefusal,
        "400: sku must be lower-case",
    ),
    Bad(
        "client-operation-trailing-newline",
        lambda w: w.supplier.client().lookup("op-1\n"),
        ValueError,
        "an operation id is",
    ),
    Bad("owner-trailing-newline", claim_as("ann\n"), ValueError, OWNER_RULE),
    Bad("session-trailing-newline", admit("bad-9", "session-a\n"), ValueError, "session_id must"),
    Bad("source-trailing-newline", admit("bad-1\n", "session-z"), ValueError, "source_id must"),
    Bad("supplier-trailing-newline", propose_for("dairy\n"), ValueError, "supplier identity must"),
    Bad(
        "actor-trailing-newline",
        cancel_with(actor="lucy\n"),
        PermissionError,
        "'lucy\\n' is not an operator",
    ),
    Bad(
        "client-identity-trailing-newline",
        lambda w: SupplierClient(w.supplier.endpoint, identity="dairy\n"),
        ValueError,
        "a supplier identity must be a non-empty label",
    ),
    # requests that once got no HTTP answer at all
    Bad(
        "body-int-5000-digits",
        post_json(b'{"sku": "vanilla-tub", "quantity": ' + b"9" * 5000 + b', "unit_cents": 1}'),
        HTTPRefusal,
        "400: the body is not JSON the supplier can read",
    ),
    Bad(
        "content-length-5000-digits",
        announce("9" * 5000),
        HTTPRefusal,
        f"413: the body is {'9' * 40} bytes; the limit is {MAX_BODY_BYTES}",
    ),
    Bad("content-length-superscript", announce("\u00b2"), HTTPRefusal, "400: Content-Length is"),
    Bad("content-length-negative", announce("-1"), HTTPRefusal, "400: Content-Length is"),
    Bad(
        "body-array-8000-deep",
        post_json(b"[" * 8000 + b"]" * 8000),
        HTTPRefusal,
        "400: the body is not JSON the supplier can read",
    ),
    Bad(
        "faults-array-8000-deep",
        post_json(b"[" * 8000 + b"]" * 8000, "/faults"),
        HTTPRefusal,
        "400: the body is not JSON the supplier can read",
    ),
    Bad(
        "faults-delay-infinite",
        post_json(b'{"delay_seconds": 1e400}', "/faults"),
        HTTPRefusal,
        "400: delay_seconds is out of range: inf",
    ),
    Bad(
        "faults-int-5000-digits",
        post_json(b'{"drop_next": ' + b"9" * 5000 + b"}", "/faults"),
        HTTPRefusal,
        "400: the body is not JSON the supplier can read",
    ),
    # the status command: exit 2 and a status: message, never a traceback or a wrong figure
    Bad(
        "status-renamed-column",
        status_after(("ALTER TABLE work RENAME COLUMN session_id TO conversation", ())),
        StatusRefusal,
        "the shop's work table has no session_id column (renamed or dropped?)",
    ),
    Bad(
        "status-renamed-outcome-column",
        status_after(("ALTER TABLE outcomes RENAME COLUMN result TO payload", ())),
        StatusRefusal,
        "the shop's outcomes table has no result column",
    ),
    Bad(
        "status-newer-leases-schema",
        status_after(("UPDATE schema_versions SET version = 3 WHERE line = 'leases'", ())),
        StatusRefusal,
        "leases schema is at version 3, newer than the version 2",
    ),
    Bad(
        "status-newer-queue-schema",
        status_after(("UPDATE schema_versions SET version = 7 WHERE line = 'queue'", ())),
        StatusRefusal,
        "queue schema is at version 7, newer than the version 1",
    ),
    Bad("status-malformed-file", damaged, StatusRefusal, "the shop file is malformed"),
    Bad("status-truncated-file", truncated, StatusRefusal, "status: "),
    Bad("status-not-a-database", not_a_shop, StatusRefusal, "status: cannot read"),
    Bad(
        "status-workers-file-malformed",
        malformed_workers_file,
        StatusRefusal,
        "is not a JSON object of owner -> pid",
    ),
    Bad(
        "status-escape-in-owner",
        status_after(("UPDATE work SET worker_id = 'ann\x1b]0;owned\x07#1' WHERE work_id = 1", ())),
        None,
        "ann\\\\x1b]0;owned\\\\x07",
    ),
    Bad(
        "status-escape-in-session",
        status_after(("UPDATE work SET session_id = 'a\x1b[2Jb' WHERE work_id = 1", ())),
        None,
        "a\\\\x1b[2Jb",
    ),
    Bad(
        "status-rounds-599.6-seconds",
        status_after(
            ("UPDATE assignment_leases SET expires = ? WHERE work_id = 1", (NOW - 599.6,))
        ),
        None,
        "expired 10m 00s ago",
    ),
    # injected time is bounded to a documented range
    Bad("claim-now-1e300", lambda w: LEASES.claim(w.db, "eve", now=1e300), ValueError, NOW_RULE),
    Bad("claim-now-negative", lambda w: LEASES.claim(w.db, "eve", now=-1.0), ValueError, NOW_RULE),
    Bad(
        "claim-now-10**400", lambda w: LEASES.claim(w.db, "eve", now=10**400), ValueError, NOW_RULE
    ),
    Bad("cancel-now-1e300", cancel_with(now=1e300), ValueError, NOW_RULE),
    Bad("approve-now-1e300", approve_with(now=1e300), ValueError, NOW_RULE),
    Bad("propose-now-nan", propose_for("dairy", now=float("nan")), ValueError, NOW_RULE),
    # size limits, each named in the error
    Bad(
        "cancel-reason-over-limit",
        cancel_with(reason="r" * 4001),
        ValueError,
        "a cancellation's reason is 4001 characters; the limit is 4000",
    ),
    Bad(
        "supplier-name-over-limit",
        propose_for("d" * 101),
        ValueError,
        "supplier identity must be a non-empty label of at most 100 characters",
    ),
    Bad(
        "client-identity-over-limit",
        lambda w: SupplierClient(w.supplier.endpoint, identity="d" * 101),
        ValueError,
        "a supplier identity must be a non-empty label of at most 100",
    ),
    # control characters in labels and ids
    Bad("owner-nul", claim_as("ann\x00"), ValueError, OWNER_RULE),
    Bad("owner-escape", claim_as("ann\x1b[2J"), ValueError, OWNER_RULE),
    Bad("owner-delete", claim_as("ann\x7f"), ValueError, OWNER_RULE),
    Bad("session-nul", admit("bad-9", "session\x00"), ValueError, "session_id must be"),
    Bad("session-escape", admit("bad-9", "session\x1b]0;x\x07"), ValueError, "session_id must"),
    Bad("source-nul", admit("bad\x00", "session-z"), ValueError, "source_id must be"),
    Bad("actor-escape", cancel_with(actor="lucy\x1b[2J"), PermissionError, "is not an operator"),
    Bad("supplier-escape", propose_for("dairy\x1b[2J"), ValueError, "supplier identity must"),
    # Python's own exception types for odd input become ValueError
    Bad("cancel-work-id-10**30", cancel_with(work_id=10**30), ValueError, "work_id must be"),
    Bad("approve-order-id-10**30", approve_with(order_id=10**30), ValueError, "order_id must"),
    Bad("cancel-actor-unhashable", cancel_with(actor=["lucy"]), ValueError, "actor must be"),
    Bad("approve-actor-unhashable", approve_with(actor={"lucy": 1}), ValueError, "actor must"),
    Bad("owner-lone-surrogate", claim_as("ann\ud800"), ValueError, OWNER_RULE),
    Bad("session-lone-surrogate", admit("bad-9", "s\ud800"), ValueError, "session_id must be"),
    Bad("supplier-lone-surrogate", propose_for("d\ud800"), ValueError, "supplier identity must"),
    Bad("reason-lone-surrogate", cancel_with(reason="why\ud800"), ValueError, "reason must be"),
    # ids are ints: SQLite would coerce the string "1"
    Bad("cancel-work-id-string", cancel_with(work_id="1"), ValueError, "work_id must be"),
    Bad("cancel-work-id-bool", cancel_with(work_id=True), ValueError, "work_id must be"),
    Bad("cancel-work-id-float", cancel_with(work_id=3.0), ValueError, "work_id must be"),
    Bad("approve-order-id-string", approve_with(order_id="1"), ValueError, "order_id must be"),
    Bad(
        "revoke-order-id-string",
        lambda w: approval.revoke(w.db, "1", actor=OPERATOR, policy=POLICY),
        ValueError,
        "order_id must be",
    ),
]
TABLE += ROUND_TWO


def test_the_table_is_at_least_ninety_rows_with_distinct_names():
    assert len(TABLE) >= 90
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
