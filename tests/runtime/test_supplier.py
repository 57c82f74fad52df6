"""The supplier process: idempotent by operation id, honest about faults, ended when done.

Every test talks to a real ``python -m lucyshop.supplier`` over HTTP on 127.0.0.1 and reads the
supplier's ledger back from its file, independently of what the client was told.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
from shop_fixtures import VANILLA, dead_endpoint

from lucyshop.lab.services.processes import wait_exit, wait_until
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.proposal import operation_id
from lucyshop.supplier import (
    SupplierClient,
    SupplierRefused,
    SupplierUnavailable,
    ledger_orders,
)

OP = operation_id(1, "dairy", VANILLA)


def raw_request(endpoint, method, path, *, body=b"", headers=()):
    """One hand-built request, so the test controls exactly which headers are sent."""
    parts = urlsplit(endpoint)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders(body or None)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def post(endpoint, operation, body: bytes):
    return raw_request(
        endpoint,
        "POST",
        f"/orders/{operation}",
        body=body,
        headers=[("Content-Length", str(len(body)))],
    )


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_same_operation_twice_is_one_order_with_the_same_receipt(supplier):
    client = supplier.client()

    first = client.order(OP, VANILLA)
    again = client.order(OP, dict(reversed(VANILLA.items())))  # another spelling, same order

    assert (
        first
        == again
        == {
            "operation": OP,
            "status": "ACCEPTED",
            "supplier": "dairy",
            "order_number": 1,
            "amount_cents": 2700,
            "reason": None,
        }
    )
    assert ledger_orders(supplier.database) == [
        {
            "operation": OP,
            "status": "ACCEPTED",
            "amount_cents": 2700,
            "order_number": 1,
            "body": VANILLA,
        },
    ]
    assert supplier.health()["orders"] == 1


def test_concurrent_sends_of_one_operation_make_one_order(supplier):
    receipts = []

    def send():
        receipts.append(supplier.client(timeout=5).order(OP, VANILLA))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert len(receipts) == 8 and all(r == receipts[0] for r in receipts)
    assert [row["operation"] for row in ledger_orders(supplier.database)] == [OP]


def test_the_same_operation_with_another_body_is_refused_409(supplier):
    client = supplier.client()
    client.order(OP, VANILLA)

    with pytest.raises(SupplierRefused) as refused:
        client.order(OP, {**VANILLA, "quantity": 60})

    assert refused.value.status == 409 and OP in refused.value.error
    assert [row["body"] for row in ledger_orders(supplier.database)] == [VANILLA]


@pytest.mark.parametrize(
    ("operation", "body", "said"),
    [
        ("op-1", b"{not json", "not JSON"),
        ("op-1", json.dumps({**VANILLA, "quantity": 0}).encode(), "quantity"),
        ("op-1", json.dumps({**VANILLA, "extra": 1}).encode(), "exactly the fields"),
        ("op%20one", json.dumps(VANILLA).encode(), "operation id"),
    ],
    ids=["bad-json", "bad-quantity", "extra-field", "bad-operation"],
)
def test_invalid_requests_are_refused_400_and_record_nothing(supplier, operation, body, said):
    status, reply = post(supplier.endpoint, operation, body)

    assert status == 400 and said in reply["error"]
    assert ledger_orders(supplier.database) == []


def test_an_oversized_body_is_refused_413_without_being_read(supplier):
    # Only the headers are sent: the supplier must answer from the Content-Length alone.
    status, reply = raw_request(
        supplier.endpoint, "POST", f"/orders/{OP}", headers=[("Content-Length", str(16 * 1024 + 1))]
    )

    assert status == 413 and "16384" in reply["error"]
    assert ledger_orders(supplier.database) == []


def test_a_body_without_content_length_is_refused_411(supplier):
    status, reply = raw_request(supplier.endpoint, "POST", f"/orders/{OP}")

    assert status == 411 and "Content-Length" in reply["error"]
    assert ledger_orders(supplier.database) == []


def test_lookup_returns_the_stored_receipt_or_none_for_an_unknown_operation(supplier):
    client = supplier.client()
    receipt = client.order(OP, VANILLA)

    assert client.lookup(OP) == receipt
    assert client.lookup("op-never-sent") is None
    assert raw_request(supplier.endpoint, "GET", "/orders/op-never-sent") == (
        404,
        {"error": "unknown operation"},
    )


def test_a_rejected_sku_gets_a_rejected_receipt_that_is_recorded_and_idempotent(supplier):
    oat = {"sku": "oat-milk", "quantity": 2, "unit_cents": 300}
    op = operation_id(1, "dairy", oat)
    client = supplier.client()

    receipt = client.order(op, oat)

    assert receipt["status"] == "REJECTED" and "oat-milk" in receipt["reason"]
    assert receipt["amount_cents"] == 0
    assert client.order(op, oat) == receipt == client.lookup(op)
    assert [(r["operation"], r["status"]) for r in ledger_orders(supplier.database)] == [
        (op, "REJECTED"),
    ]


def test_a_reply_lost_after_commit_leaves_the_order_in_the_ledger(supplier):
    supplier.set_faults(drop_next=1)
    client = supplier.client()

    with pytest.raises(SupplierUnavailable):
        client.order(OP, VANILLA)

    assert [row["operation"] for row in ledger_orders(supplier.database)] == [OP]
    receipt = client.lookup(OP)
    assert receipt["status"] == "ACCEPTED" and receipt["operation"] == OP
    assert client.order(OP, VANILLA) == receipt  # the retry is answered, not dropped again
    assert supplier.health()["dropped"] == 1
    assert len(ledger_orders(supplier.database)) == 1


def test_a_reply_slower_than_the_client_timeout_is_unavailable_but_committed(supplier):
    late = 3.0  # the reply's delay, ten times the client's timeout
    supplier.set_faults(delay_next=1, delay_seconds=late)
    client = supplier.client(timeout=0.3)

    started = time.monotonic()
    with pytest.raises(SupplierUnavailable):
        client.order(OP, VANILLA)

    assert time.monotonic() - started < late  # gave up at its timeout, not at the late reply
    # committed before the delayed reply: wait for the commit, which a loaded machine may make
    # after the client has given up
    wait_until(lambda: ledger_orders(supplier.database), timeout=60, what="the order's commit")
    assert [row["operation"] for row in ledger_orders(supplier.database)] == [OP]
    assert supplier.client().lookup(OP)["status"] == "ACCEPTED"
    assert supplier.health()["delayed"] == 1


def test_fault_rates_apply_only_to_new_orders(tmp_path):
    with supplier_process(tmp_path, drop_rate=1.0) as running:
        client = running.client()
        with pytest.raises(SupplierUnavailable):
            client.order(OP, VANILLA)

        assert client.order(OP, VANILLA)["status"] == "ACCEPTED"
        assert running.health()["dropped"] == 1


def test_bad_fault_settings_are_refused_400(supplier):
    with pytest.raises(SupplierRefused) as refused:
        supplier.set_faults(drop_rate=2)

    assert refused.value.status == 400 and "drop_rate" in refused.value.error


def test_a_client_against_a_dead_port_is_unavailable_and_keeps_its_identity():
    client = SupplierClient(dead_endpoint(), identity="dairy", timeout=0.5)

    with pytest.raises(SupplierUnavailable, match="dairy"):
        client.order(OP, VANILLA)
    with pytest.raises(SupplierUnavailable):
        client.lookup(OP)
    assert client.identity == "dairy" and client.timeout == 0.5


@pytest.mark.parametrize(
    ("operation", "said"),
    [("op-html", "garbage"), ("op-shape", "garbage"), ("op-other", "bakery"), ("op-crash", "500")],
    ids=["not-json", "not-a-receipt", "another-suppliers-receipt", "server-error"],
)
def test_a_server_that_answers_garbage_is_unavailable(garbage_supplier, operation, said):
    client = SupplierClient(garbage_supplier, identity="dairy", timeout=2)

    with pytest.raises(SupplierUnavailable, match=said):
        client.order(operation, VANILLA)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "1"])
def test_a_client_timeout_must_be_finite_and_positive(timeout):
    with pytest.raises(ValueError, match="timeout"):
        SupplierClient("http://127.0.0.1:1", identity="dairy", timeout=timeout)


def test_the_ready_file_describes_the_running_supplier(tmp_path):
    with supplier_process(tmp_path, identity="bakery") as running:
        ready = json.loads((tmp_path / "bakery-ready.json").read_text())

        assert ready == {
            "port": int(urlsplit(running.endpoint).port),
            "pid": running.pid,
            "endpoint": running.endpoint,
            "identity": "bakery",
            "database": str(running.database.resolve()),
        }
        assert running.health() == {
            "status": "ok",
            "identity": "bakery",
            "orders": 0,
            "dropped": 0,
            "delayed": 0,
        }


def test_sigterm_shuts_the_supplier_down_cleanly(tmp_path):
    with supplier_process(tmp_path) as running:
        running.client().order(OP, VANILLA)
        running.proc.send_signal(signal.SIGTERM)

        assert wait_exit(running.proc, timeout=5) == 0


def test_the_ledger_survives_a_restart(tmp_path):
    with supplier_process(tmp_path) as first:
        receipt = first.client().order(OP, VANILLA)
    with supplier_process(tmp_path) as second:
        assert second.client().order(OP, VANILLA) == receipt
        assert second.health()["orders"] == 1
    assert len(ledger_orders(second.database)) == 1  # readable after the supplier has exited


def test_supplier_process_leaves_no_process_after_an_exception(tmp_path):
    with pytest.raises(RuntimeError, match="boom"), supplier_process(tmp_path) as running:
        pid = running.pid
        raise RuntimeError("boom")

    assert gone(pid)


def test_a_supplier_that_cannot_open_its_ledger_is_reported_with_its_log(tmp_path):
    (tmp_path / "dairy-ledger.sqlite").mkdir()  # a directory where the database file should be

    started = time.monotonic()
    with pytest.raises(RuntimeError) as raised, supplier_process(tmp_path):
        pass

    assert time.monotonic() - started < 10
    assert "exited with status 1" in str(raised.value)
    assert "unable to open database file" in str(raised.value)


def test_a_burst_of_200_connections_waits_in_the_backlog_and_all_get_answers(supplier):
    """The listen backlog is at least 128, and 200 concurrent connections all get answers.

    While the supplier is stopped (SIGSTOP) nothing is accepted, so the handshakes the kernel
    completes are exactly those the backlog holds: with the old backlog of 5 about six of them.
    Once it continues, every connection, queued or retrying its handshake, gets its answer.
    """
    parts = urlsplit(supplier.endpoint)
    sockets = []
    os.kill(supplier.pid, signal.SIGSTOP)
    try:
        for _ in range(200):
            sock = socket.socket()
            sockets.append(sock)
            sock.setblocking(False)
            sock.connect_ex((parts.hostname, parts.port))
        queued = handshakes(sockets, within=2.0)
    finally:
        os.kill(supplier.pid, signal.SIGCONT)
    try:
        with ThreadPoolExecutor(max_workers=len(sockets)) as pool:
            lines = list(pool.map(health_over, sockets))
    finally:
        for sock in sockets:
            sock.close()
    assert queued >= 128, f"only {queued} handshakes completed while the supplier was stopped"
    assert lines == [b"HTTP/1.1 200 OK"] * len(sockets)


def handshakes(sockets: list[socket.socket], *, within: float) -> int:
    """How many of these non-blocking connects complete within ``within`` seconds."""
    done: set[socket.socket] = set()
    deadline = time.monotonic() + within
    while len(done) < len(sockets) and (left := deadline - time.monotonic()) > 0:
        waiting = [sock for sock in sockets if sock not in done]
        _, writable, _ = select.select([], waiting, [], min(left, 0.1))
        done.update(s for s in writable if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
    return len(done)


def health_over(sock: socket.socket) -> bytes:
    """GET /health on a connection once its handshake is done; the reply's status line."""
    _, writable, _ = select.select([], [sock], [], 30)
    assert writable, "the handshake did not complete within 30 s"
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
    sock.setblocking(True)
    sock.settimeout(30)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: supplier\r\nConnection: close\r\n\r\n")
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    return reply.split(b"\r\n", 1)[0]
