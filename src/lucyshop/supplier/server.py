"""The supplier's server (chapter 12): an HTTP process with its own SQLite ledger.

The shop can only learn what the supplier did by asking it, so the supplier is idempotent by
operation id: sending the same operation and proposal again returns the same receipt and never
a second order, and reusing an operation id for another proposal is refused (409). Its fault
switches reproduce the two cases that make a reply unknowable: the reply lost after the order
was committed, and a reply slower than the client's timeout.

    python -m lucyshop.supplier --database FILE --port 0 --ready FILE [--identity NAME]
        [--drop-rate P] [--delay-rate P] [--delay-seconds S] [--seed N] [--reject-skus a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lucyshop import validate
from lucyshop.atomic import write_ready
from lucyshop.proposal import amount_cents, canonical, validate_operation, validate_proposal

MAX_BODY_BYTES = 16 * 1024
BUSY_TIMEOUT_MS = 5000
MAX_DELAY_SECONDS = 60.0

# One row per operation id ever seen, accepted or rejected. The primary key is what makes a
# retried operation a lookup instead of a second order.
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders(
    operation TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ACCEPTED', 'REJECTED')),
    order_number INTEGER,
    amount_cents INTEGER,
    receipt TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class OperationConflict(Exception):
    """An operation id already names a different proposal."""


class Ledger:
    """The supplier's durable record; one connection, every access serialised by a lock."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        self._db.execute(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def lookup(self, operation: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT receipt FROM orders WHERE operation = ?", (operation,)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM orders").fetchone()[0]

    def place(
        self, operation: str, proposal: dict[str, Any], *, identity: str, reason: str | None
    ) -> tuple[dict[str, Any], bool]:
        """Record the order once; return its receipt and whether this call created it.

        BEGIN IMMEDIATE takes the write lock before the read, so two requests for the same
        operation cannot both see "absent" and both insert; the order number is the next one
        under that same lock.
        """
        body = canonical(proposal)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT body, receipt FROM orders WHERE operation = ?", (operation,)
                ).fetchone()
                if row is not None:
                    self._db.execute("COMMIT")
                    if row[0] != body:
                        raise OperationConflict(
                            f"operation {operation} already names the order {row[0]}, not {body}"
                        )
                    return json.loads(row[1]), False
                (number,) = self._db.execute(
                    "SELECT COALESCE(MAX(order_number), 0) + 1 FROM orders"
                ).fetchone()
                status = "ACCEPTED" if reason is None else "REJECTED"
                receipt = {
                    "operation": operation,
                    "status": status,
                    "supplier": identity,
                    "order_number": number,
                    "amount_cents": amount_cents(proposal) if reason is None else 0,
                    "reason": reason,
                }
                self._db.execute(
                    "INSERT INTO orders(operation, body, status, order_number, amount_cents,"
                    " receipt, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        operation,
                        body,
                        status,
                        number,
                        receipt["amount_cents"],
                        json.dumps(receipt, sort_keys=True),
                        time.time(),
                    ),
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        return receipt, True


class Faults:
    """The experiment switches; the next-N counters win over the seeded random rates."""

    def __init__(self, *, drop_rate: float, delay_rate: float, delay_seconds: float, seed: int):
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self.settings: dict[str, float | int] = {
            "drop_rate": drop_rate,
            "delay_rate": delay_rate,
            "delay_seconds": delay_seconds,
            "drop_next": 0,
            "delay_next": 0,
        }
        self.dropped = 0
        self.delayed = 0
        self.update(self.settings)

    def update(self, changes: Any) -> dict[str, float | int]:
        """Apply a subset of the settings, all or none; ValueError says which one is wrong."""
        if not isinstance(changes, dict) or not changes or set(changes) - set(self.settings):
            raise ValueError(f"faults is a JSON object with some of {sorted(self.settings)}")
        for name, value in changes.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if name.endswith("_rate"):
                ok = number and 0.0 <= value <= 1.0
            elif name == "delay_seconds":
                ok = number and _within_delay(value)
            else:
                ok = number and isinstance(value, int) and value >= 0
            if not ok:
                raise ValueError(f"{name} is out of range: {value!r}")
        with self._lock:
            self.settings.update(changes)
            return dict(self.settings)

    def choose(self) -> tuple[bool, float]:
        """For a newly committed order: drop its reply? and how long to delay it."""
        with self._lock:
            s = self.settings
            if s["drop_next"] > 0:
                s["drop_next"] -= 1
                drop = True
            else:
                drop = self._random.random() < s["drop_rate"]
            if drop:
                self.dropped += 1
                return True, 0.0
            if s["delay_next"] > 0:
                s["delay_next"] -= 1
                delay = True
            else:
                delay = self._random.random() < s["delay_rate"]
            if delay:
                self.delayed += 1
                return False, float(s["delay_seconds"])
            return False, 0.0


class SupplierServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: a burst of connections waits, not refused

    def __init__(
        self,
        port: int,
        *,
        ledger: Ledger,
        identity: str,
        faults: Faults,
        reject_skus: frozenset[str],
    ) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.ledger = ledger
        self.identity = identity
        self.faults = faults
        self.reject_skus = reject_skus


class Handler(BaseHTTPRequestHandler):
    server: SupplierServer
    timeout = 10  # a client that stops sending mid-request cannot hold a thread forever
    protocol_version = "HTTP/1.1"

    def reply(self, status: int, data: dict[str, Any]) -> None:
        text = json.dumps(data, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(text)

    def refuse(self, status: int, error: str) -> None:
        self.reply(status, {"error": error})

    def read_json(self) -> Any:
        """The request body as JSON; replies 411/413/400 itself and returns None when refused.

        Every refusal is an answer: a length that is not plain ASCII digits, a length or number
        too large to convert, and nesting too deep to parse each get a 400 or 413 with a reason.
        """
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            self.refuse(411, "a body needs a Content-Length header")
            return None
        if not (length.isascii() and length.isdigit()):
            self.close_connection = True
            self.refuse(400, f"Content-Length is not a whole number: {length[:40]!r}")
            return None
        if len(length) > len(str(MAX_BODY_BYTES)) or int(length) > MAX_BODY_BYTES:
            self.close_connection = True  # the unread body must not be parsed as a request
            self.refuse(413, f"the body is {length[:40]} bytes; the limit is {MAX_BODY_BYTES}")
            return None
        raw = self.rfile.read(int(length))
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError too
            self.refuse(400, f"the body is not JSON the supplier can read: {exc}"[:300])
            return None

    def operation(self) -> str | None:
        """The operation id of an /orders/{operation} path, or None for any other path."""
        path = urlsplit(self.path).path
        return path.removeprefix("/orders/") if path.startswith("/orders/") else None

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/health":
            faults = self.server.faults
            self.reply(
                200,
                {
                    "status": "ok",
                    "identity": self.server.identity,
                    "orders": self.server.ledger.count(),
                    "dropped": faults.dropped,
                    "delayed": faults.delayed,
                },
            )
            return
        if (operation := self.operation()) is None:
            self.refuse(404, f"no such resource: {path}")
            return
        try:
            validate_operation(operation)
        except ValueError as exc:
            self.refuse(400, str(exc))
            return
        receipt = self.server.ledger.lookup(operation)
        if receipt is None:
            self.refuse(404, "unknown operation")
        else:
            self.reply(200, receipt)

    def do_POST(self) -> None:
        if (operation := self.operation()) is None:
            self.refuse(404, f"no such resource: {urlsplit(self.path).path}")
            return
        if (body := self.read_json()) is None:
            return
        try:
            validate_operation(operation)
            proposal = validate_proposal(body)
        except ValueError as exc:
            self.refuse(400, str(exc))
            return
        reason = None
        if proposal["sku"] in self.server.reject_skus:
            reason = f"{self.server.identity} does not supply sku {proposal['sku']!r}"
        try:
            receipt, created = self.server.ledger.place(
                operation, proposal, identity=self.server.identity, reason=reason
            )
        except OperationConflict as exc:
            self.refuse(409, str(exc))
            return
        if created:
            drop, delay = self.server.faults.choose()
            if drop:
                self.log_message("dropped the reply to %s after commit", operation)
                self.close_connection = True  # lost reply after commit: say nothing, hang up
                return
            if delay:
                self.log_message("delaying the reply to %s by %.3fs", operation, delay)
                time.sleep(delay)
        self.reply(200, receipt)

    def do_PUT(self) -> None:
        if urlsplit(self.path).path != "/faults":
            self.refuse(404, f"no such resource: {urlsplit(self.path).path}")
            return
        if (body := self.read_json()) is None:
            return
        try:
            self.reply(200, self.server.faults.update(body))
        except ValueError as exc:
            self.refuse(400, str(exc))


def ledger_orders(database: str | Path) -> list[dict[str, Any]]:
    """Every order in a supplier's ledger, read from its file (read-only), oldest first.

    This is the independent witness: it does not ask the supplier or trust the shop's records.
    """
    uri = Path(database).resolve().as_uri() + "?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        rows = db.execute(
            "SELECT operation, status, amount_cents, order_number, body FROM orders"
            " ORDER BY order_number"
        ).fetchall()
    return [
        {
            "operation": op,
            "status": status,
            "amount_cents": cents,
            "order_number": number,
            "body": json.loads(body),
        }
        for op, status, cents, number, body in rows
    ]


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a rate is from 0 to 1: {text}")
    return value


def _within_delay(value: float) -> bool:
    try:
        validate.seconds(value, "delay_seconds", most=MAX_DELAY_SECONDS)
    except ValueError:
        return False
    return True


def _checked(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a ``validate`` check: its ValueError becomes argparse's message."""

    def convert(text: str) -> Any:
        try:
            return check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.supplier", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--database", required=True, type=Path, help="the ledger's SQLite file")
    parser.add_argument("--port", required=True, type=int, help="0 picks a free port")
    parser.add_argument("--ready", required=True, type=Path, help="JSON written once listening")
    parser.add_argument(
        "--identity", type=_checked(lambda text: validate.label(text, "identity")), default="dairy"
    )
    parser.add_argument("--drop-rate", type=_rate, default=0.0, help="lose the reply after commit")
    parser.add_argument("--delay-rate", type=_rate, default=0.0, help="delay the reply")
    parser.add_argument(
        "--delay-seconds",
        type=_checked(lambda text: validate.seconds(float(text), "delay", most=MAX_DELAY_SECONDS)),
        default=0.0,
    )
    parser.add_argument("--seed", type=int, default=0, help="for the fault rates")
    parser.add_argument("--reject-skus", default="", help="comma-separated skus answered REJECTED")
    args = parser.parse_args(argv)

    ledger = Ledger(args.database)
    faults = Faults(
        drop_rate=args.drop_rate,
        delay_rate=args.delay_rate,
        delay_seconds=args.delay_seconds,
        seed=args.seed,
    )
    reject = frozenset(sku for sku in args.reject_skus.split(",") if sku)
    server = SupplierServer(
        args.port, ledger=ledger, identity=args.identity, faults=faults, reject_skus=reject
    )

    def stop(signum: int, _frame: object) -> None:
        # shutdown() waits for serve_forever() to return, so it must run on another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = server.server_address[1]
    write_ready(
        args.ready,
        {
            "port": port,
            "pid": os.getpid(),
            "endpoint": f"http://127.0.0.1:{port}",
            "identity": args.identity,
            "database": str(args.database.resolve()),
        },
    )
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        ledger.close()
    return 0
