"""``python -m lucyshop status`` and ``python -m lucyshop.lab.reconcile``: the four signals,
read from real records.

The shop is built with the reference solutions, and the status report runs with the hidden
``--now``, so the screen is the same on every run and can be compared with
``tests/runtime/expected/status.txt`` (and ``status.json``): the leases it shows were claimed
with ``claim``'s ``now``, and the work that finished (``finish`` takes no ``now``) was claimed
and finished on the wall clock, whose times the report does not show. Each command runs as
a real ``python -m lucyshop`` process in the shop's directory, naming the shop ``shop.db``.

After a deliberate change to the status report, rewrite the expectations and read the diff:

    UPDATE_EXPECTED=1 .venv/bin/python -m pytest tests/runtime/test_status.py
"""

from __future__ import annotations

import json
import os
import random
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from shop_fixtures import VANILLA, dead_endpoint

from lucyshop.approval import (
    SpendingPolicy,
    account,
    approve,
    execute,
    get_order,
    open_shop,
    propose,
)
from lucyshop.lab.given.orders import OPERATOR
from lucyshop.lab.loader import load_impl
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.status import collect
from lucyshop.supplier import ledger_orders

EXPECTED = Path(__file__).parent / "expected"
T = 1_700_000_000.0
NOW = T + 100  # the status report's clock: work 4's lease expired 39 s ago, work 5's has 40 s left
ROOMY = SpendingPolicy({OPERATOR}, total_cents=50_000, automatic_order_cents=10_000)
OAT = {"sku": "oat-milk", "quantity": 2, "unit_cents": 300}  # 600 cents
REASON = "the customer called to cancel"


class Scripted:
    """A supplier that accepts, or loses the reply: the records look as if a real one had."""

    identity, timeout = "dairy", 1.0

    def __init__(self, *, accept: bool) -> None:
        self.accept = accept

    def lookup(self, operation):
        return None

    def order(self, operation, proposal):
        if not self.accept:
            raise ConnectionError("the reply was lost")
        return {
            "operation": operation,
            "status": "ACCEPTED",
            "supplier": "dairy",
            "order_number": 1,
            "amount_cents": 2700,
            "reason": None,
        }


def approved(db, held, proposal, now):
    order = propose(db, held, supplier="dairy", proposal=proposal, now=now)
    return approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=ROOMY, now=now)


def build_shop(path: Path) -> None:
    """One work item in each situation, in this order (work ids 1-6):

    1 finished DONE with an ACCEPTED order; 2 finished BLOCKED with an UNKNOWN order (reply
    lost); 3 cancelled by the operator with its approved order revoked; 4 running under an
    expired lease at generation 2; 5 running under a live lease; 6 pending, never claimed.
    """
    leases = load_impl("solutions")
    db, queue = leases.open_worker_shop(path)
    try:
        leases.enqueue(queue, "a-1", "s1", "order six vanilla tubs")
        held = leases.claim(db, "till", ttl=30)
        order = approved(db, held, VANILLA, None)
        execute(db, held, order["id"], Scripted(accept=True), policy=ROOMY)
        leases.finish(db, held, "DONE", f"sent {order['operation']}")

        leases.enqueue(queue, "a-2", "s2", "order two oat milk")
        held = leases.claim(db, "till", ttl=30)
        order = approved(db, held, OAT, None)
        execute(db, held, order["id"], Scripted(accept=False), policy=ROOMY)
        leases.finish(db, held, "BLOCKED", f"{order['operation']} is UNKNOWN")

        work_id = leases.enqueue(queue, "a-3", "s3", "order vanilla for the weekend")
        held = leases.claim(db, "till", ttl=30, now=T + 20)
        approved(db, held, VANILLA, T + 21)
        leases.cancel(db, work_id, actor=OPERATOR, policy=ROOMY, reason=REASON)

        leases.enqueue(queue, "a-4", "s4", "restock the cones")
        leases.claim(db, "night", ttl=10, now=T + 30)
        leases.claim(db, "night", ttl=20, now=T + 41)  # taken over: generation 2, expires T + 61

        leases.enqueue(queue, "a-5", "s5", "count the freezer")
        leases.claim(db, "day", ttl=90, now=T + 50)  # expires T + 140

        leases.enqueue(queue, "a-6", "s6", "answer the supplier's email")
    finally:
        db.close()


@pytest.fixture
def shop_file(tmp_path) -> Path:
    path = tmp_path / "shop.db"
    build_shop(path)
    return path


def lucyshop(
    *args: str, cwd: Path, check: int | None = 0, module: str = "lucyshop"
) -> subprocess.CompletedProcess:
    """Run ``python -m MODULE ARGS`` in ``cwd``; by default it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check is not None:
        assert done.returncode == check, (
            f"exit {done.returncode}, stderr:\n{done.stderr}\nstdout:\n{done.stdout}"
        )
    return done


def reconcile(*args: str, cwd: Path, check: int | None = 0) -> subprocess.CompletedProcess:
    return lucyshop(*args, cwd=cwd, check=check, module="lucyshop.lab.reconcile")


def status(shop_file: Path, *args: str, check: int | None = 0) -> subprocess.CompletedProcess:
    return lucyshop(
        "status", shop_file.name, "--impl", "solutions", *args, cwd=shop_file.parent, check=check
    )


def stable(report: dict) -> dict:
    """The status report without what differs between runs of the same records: paths, latency."""
    report = dict(report)
    report.pop("shop")
    report["health"] = dict(report["health"])
    report["health"]["supplier"] = {
        k: v for k, v in report["health"]["supplier"].items() if k != "latency_ms"
    }
    return report


def compare(name: str, seen: str) -> None:
    expected = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED"):
        expected.parent.mkdir(exist_ok=True)
        expected.write_text(seen)
    assert expected.is_file(), f"no {expected}: run with UPDATE_EXPECTED=1 once, then read it"
    assert seen == expected.read_text(), (
        f"the status report differs from {expected}; it printed:\n{seen}"
    )


def dump(path: Path) -> list[str]:
    uri = path.resolve().as_uri() + "?mode=ro"
    db = sqlite3.connect(uri, uri=True)
    try:
        return list(db.iterdump())
    finally:
        db.close()


# ---------------------------------------------------------------- the four signals


def test_the_screen_shows_every_situation_as_expected(shop_file):
    text = status(shop_file, "--now", str(NOW)).stdout
    compare("status.txt", text)


def test_python_m_lucyshop_status_is_the_same_command(shop_file):
    """The package's own ``python -m lucyshop.status`` prints what ``python -m lucyshop status``
    prints, byte for byte, screen and JSON, and nothing on stderr (no runpy warning)."""
    for extra in ((), ("--json",)):
        args = (shop_file.name, "--impl", "solutions", "--now", str(NOW), *extra)
        command = lucyshop("status", *args, cwd=shop_file.parent)
        package = lucyshop(*args, cwd=shop_file.parent, module="lucyshop.status")
        assert (package.stdout, package.stderr) == (command.stdout, command.stderr)
        assert command.stdout and command.stderr == ""


def test_the_json_form_holds_the_same_figures(shop_file):
    report = json.loads(status(shop_file, "--now", str(NOW), "--json").stdout)
    compare("status.json", json.dumps(stable(report), indent=2, sort_keys=True) + "\n")


def test_every_figure_comes_from_the_records(shop_file):
    report = json.loads(status(shop_file, "--now", str(NOW), "--json").stdout)
    work = report["work"]
    assert work["counts"] == {"pending": 1, "running": 2, "finished": 3}
    assert work["outcomes"] == {"DONE": 1, "BLOCKED": 1, "CANCELED": 1}
    assert [
        (r["work_id"], r["owner"], r["generation"], r["lease_left"], r["eligible_for_takeover"])
        for r in work["running"]
    ] == [(4, "night", 2, -39.0, True), (5, "day", 1, 40.0, False)]
    [cancelled] = report["cancellations"]
    assert (
        cancelled["work_id"],
        cancelled["actor"],
        cancelled["reason"],
        cancelled["generation"],
    ) == (3, OPERATOR, REASON, 2)
    assert [(o["order_id"], o["amount_cents"], o["revoked_by"]) for o in cancelled["revoked"]] == [
        (3, 2700, OPERATOR)
    ]
    orders = report["orders"]
    assert {k: v for k, v in orders["counts"].items() if v} == {
        "ACCEPTED": 1,
        "UNKNOWN": 1,
        "REVOKED": 1,
    }
    assert orders["account"] == {"limit_cents": 100_000, "reserved_cents": 600, "spent_cents": 2700}
    [uncertain] = orders["uncertain"]
    db = sqlite3.connect(shop_file)
    operation = db.execute("SELECT operation FROM assistant_orders WHERE id = 2").fetchone()[0]
    db.close()
    assert (uncertain["order_id"], uncertain["operation"], uncertain["reserved_cents"]) == (
        2,
        operation,
        600,
    )
    assert uncertain["command"] == (
        "python -m lucyshop.lab.reconcile shop.db --supplier URL --identity dairy --impl solutions"
    ), f"without --supplier the command says where the address goes: {uncertain['command']}"


def test_the_clock_moves_the_leases(shop_file):
    later = json.loads(status(shop_file, "--now", str(NOW + 41), "--json").stdout)["work"][
        "running"
    ]
    assert [(r["work_id"], r["lease_left"], r["eligible_for_takeover"]) for r in later] == [
        (4, -80.0, True),
        (5, -1.0, True),
    ], "41 s later the live lease has expired too"


def test_the_screen_fits_80_columns(shop_file):
    text = status(shop_file, "--now", str(NOW)).stdout
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert wide == [], f"lines wider than 80 columns: {wide}"


def test_the_report_never_writes_the_shop(shop_file):
    before = dump(shop_file)
    status(shop_file, "--now", str(NOW))
    status(shop_file, "--json")
    assert dump(shop_file) == before


def test_a_live_supplier_is_healthy_with_a_latency(shop_file, tmp_path):
    with supplier_process(tmp_path) as up:
        report = json.loads(
            status(shop_file, "--supplier", up.endpoint, "--identity", "dairy", "--json").stdout
        )
        text = status(shop_file, "--supplier", up.endpoint, "--identity", "dairy").stdout
    health = report["health"]["supplier"]
    assert (health["checked"], health["answering"], health["identity"]) == (True, True, "dairy"), (
        health
    )
    assert isinstance(health["latency_ms"], float) and 0 < health["latency_ms"] < 2000, health
    assert "supplier  healthy: dairy answered /health in " in text, text
    [order] = report["orders"]["uncertain"]
    assert f"--supplier {up.endpoint} --identity dairy" in order["command"], (
        f"with the supplier known, the command is complete: {order['command']}"
    )


def test_a_supplier_answering_as_another_identity_is_flagged(shop_file, tmp_path):
    with supplier_process(tmp_path, identity="creamery") as up:
        report = json.loads(
            status(shop_file, "--supplier", up.endpoint, "--identity", "dairy", "--json").stdout
        )
        text = status(shop_file, "--supplier", up.endpoint, "--identity", "dairy").stdout
    assert report["health"]["supplier"]["identity"] == "creamery"
    assert "answering as creamery, NOT the expected dairy" in text, text
    [order] = report["orders"]["uncertain"]
    assert "--supplier URL" in order["command"], (
        "that endpoint is not where dairy's orders are settled"
    )


def test_a_dead_port_is_not_answering(shop_file):
    endpoint = dead_endpoint()
    report = json.loads(
        status(shop_file, "--supplier", endpoint, "--timeout", "0.5", "--json").stdout
    )
    text = status(shop_file, "--supplier", endpoint, "--timeout", "0.5").stdout
    health = report["health"]["supplier"]
    assert (health["checked"], health["answering"], health["latency_ms"]) == (True, False, None), (
        health
    )
    assert health["error"], "it says why"
    assert f"supplier  not answering at {endpoint}" in text, text


def test_worker_liveness_comes_from_a_workers_file(shop_file, tmp_path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    workers = tmp_path / "workers.json"
    workers.write_text(json.dumps({"day": os.getpid(), "night": int(gone.stdout)}))
    report = json.loads(status(shop_file, "--workers", str(workers), "--json").stdout)
    registry = report["health"]["workers"]
    assert [(p["owner"], p["alive"], p["holds"]) for p in registry["processes"]] == [
        ("day", True, [5]),
        ("night", False, [4]),
    ], registry
    assert (registry["alive"], registry["gone"], registry["note"]) == (1, 1, None)
    text = status(shop_file, "--workers", str(workers)).stdout
    assert "1 alive, 1 gone" in text and "GONE" in text, text
    assert "process liveness unknown" not in text


def test_worker_liveness_from_a_workers_table(tmp_path):
    path = tmp_path / "shop.db"
    build_shop(path)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE workers(owner TEXT PRIMARY KEY, pid INTEGER)")
    db.execute("INSERT INTO workers VALUES ('day', ?)", (os.getpid(),))
    db.commit()
    db.close()
    registry = json.loads(status(path, "--json").stdout)["health"]["workers"]
    assert registry["source"] == "the shop's workers table"
    assert [(p["owner"], p["alive"]) for p in registry["processes"]] == [("day", True)]
    assert registry["holders_without_pid"] == [{"owner": "night", "holds": [4]}]


def test_without_pid_information_liveness_is_unknown(shop_file):
    registry = json.loads(status(shop_file, "--json").stdout)["health"]["workers"]
    assert registry["note"] == "no worker registry: process liveness unknown"
    assert (registry["processes"], registry["alive"], registry["gone"]) == ([], 0, 0), (
        "nothing invented"
    )


def test_a_shop_without_the_leases_migration_says_so(tmp_path):
    path = tmp_path / "shop.db"
    db, queue = open_shop(path)  # chapter 11's schema only
    queue.admit("a-1", "s1", "order vanilla")
    db.close()
    text = status(path).stdout
    assert "leases migration is missing" in text, text
    report = json.loads(status(path, "--json").stdout)
    assert (
        report["leases_migration"],
        report["cancellations"],
        report["work"]["counts"]["pending"],
    ) == (False, None, 1)
    assert (
        "leases"
        not in sqlite3.connect(path)
        .execute("SELECT group_concat(line) FROM schema_versions")
        .fetchone()[0]
    ), "the status report migrated nothing"


def test_a_missing_shop_is_an_error_and_creates_nothing(tmp_path):
    done = lucyshop("status", "no-such-shop.db", cwd=tmp_path, check=2)
    assert "no shop file at no-such-shop.db" in done.stderr
    assert list(tmp_path.iterdir()) == [], "no file was created"


# ---------------------------------------------------------------- reconcile


@pytest.fixture
def dropped(tmp_path):
    """A shop whose one order reached a live supplier, which committed it and lost the reply."""
    path = tmp_path / "shop.db"
    leases = load_impl("solutions")
    with supplier_process(tmp_path) as up:
        db, queue = leases.open_worker_shop(path)
        leases.enqueue(queue, "a-1", "s1", "order six vanilla tubs")
        held = leases.claim(db, "till", ttl=30)
        order = approved(db, held, VANILLA, None)
        up.set_faults(drop_next=1)
        sent = execute(db, held, order["id"], up.client(timeout=1.0), policy=ROOMY)
        assert sent["status"] == "UNKNOWN", sent
        leases.finish(db, held, "BLOCKED", f"{order['operation']} is UNKNOWN")
        db.close()
        assert len(ledger_orders(up.database)) == 1, "the supplier has it; the shop does not know"
        yield path, up, order


def test_the_printed_reconcile_command_settles_a_dropped_reply(dropped):
    path, up, order = dropped
    report = json.loads(
        status(path, "--supplier", up.endpoint, "--identity", "dairy", "--json").stdout
    )
    [uncertain] = report["orders"]["uncertain"]
    assert (uncertain["operation"], uncertain["status"]) == (order["operation"], "UNKNOWN")
    command = shlex.split(uncertain["command"])
    assert command[:3] == ["python", "-m", "lucyshop.lab.reconcile"], command

    done = lucyshop(*command[3:], cwd=path.parent, module=command[2])

    assert f"{order['operation']}  UNKNOWN -> ACCEPTED" in done.stdout, done.stdout
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    assert get_order(db, order["id"])["status"] == "ACCEPTED", "settled by lookup"
    money = account(db)
    db.close()
    assert (money["reserved_cents"], money["spent_cents"]) == (0, 2700), (
        f"reservation moved to spent: {money}"
    )
    assert len(ledger_orders(up.database)) == 1, (
        "reconcile sent nothing: still one order at the supplier"
    )
    after = json.loads(status(path, "--supplier", up.endpoint, "--json").stdout)
    assert after["orders"]["uncertain"] == [], "the status report no longer lists it"


def test_reconcile_with_a_stub_says_not_started_and_changes_nothing(dropped):
    path, up, _order = dropped
    before = dump(path)
    done = reconcile(
        path.name,
        "--supplier",
        up.endpoint,
        "--identity",
        "dairy",
        "--impl",
        "learner",
        cwd=path.parent,
        check=3,
    )
    assert "reconcile() is not started" in done.stderr, done.stderr
    assert dump(path) == before


def test_reconcile_json_rows(dropped):
    path, up, order = dropped
    done = reconcile(
        path.name,
        "--supplier",
        up.endpoint,
        "--identity",
        "dairy",
        "--impl",
        "solutions",
        "--json",
        cwd=path.parent,
    )
    rows = json.loads(done.stdout)
    assert [(r["order_id"], r["before"], r["after"]) for r in rows] == [
        (order["id"], "UNKNOWN", "ACCEPTED")
    ]


# --------------------------------------------------------- the status report agrees with claim


def random_shop(path: Path, seed: int) -> None:
    """Running items in a few sessions, each lease expired or alive at NOW, written by hand.

    A shop written by the reference never holds two running items in one session, but records
    can (an older kit, a hand repair); the status report's rule must still be claim's rule there.
    """
    rng = random.Random(seed)
    leases = load_impl("solutions")
    db, queue = leases.open_worker_shop(path)
    try:
        for n in range(rng.randint(3, 10)):
            work_id = leases.enqueue(queue, f"w-{n}", f"s{rng.randint(1, 4)}", "work")
            expires = NOW + rng.choice([-500.0, -1.0, 0.0, 0.0001, 1.0, 500.0])
            db.execute(
                "UPDATE work SET state = 'running', worker_id = ? WHERE work_id = ?",
                (f"w{n}#1", work_id),
            )
            db.execute(
                "INSERT INTO assignment_leases(work_id, worker_id, expires, generation)"
                " VALUES (?, ?, ?, 1)",
                (work_id, f"w{n}#1", expires),
            )
    finally:
        db.close()


@pytest.mark.parametrize("seed", range(12))
def test_eligible_for_takeover_is_what_the_reference_claim_takes(tmp_path, seed):
    """Pinned against the reference: claim at NOW takes the oldest item the status report
    calls eligible, and returns None when it calls none eligible; again after every claim."""
    path = tmp_path / "shop.db"
    random_shop(path, seed)
    leases = load_impl("solutions")
    db = leases.open_worker_shop(path)[0]
    try:
        for _ in range(12):
            report = collect(str(path), now=NOW)
            eligible = [
                item["work_id"]
                for item in report["work"]["running"]
                if item["eligible_for_takeover"]
            ]
            taken = leases.claim(db, "pinned", ttl=60, now=NOW)
            assert (taken and taken.work_id) == (min(eligible) if eligible else None), report
            if taken is None:
                break
        else:
            pytest.fail("claim kept taking work beyond the shop's size")
    finally:
        db.close()
