"""What the records say: the four signals of one shop, read fresh and returned as data.

``collect`` opens the shop read-only, checks it is a shop this report can read (its schema
lines, its columns, its structure) and gathers each signal into one JSON-ready dict: service
health (the supplier's ``/health``, worker processes alive or gone), work progress (states,
outcomes, every running lease as of now), cancellation, and external completion (orders, the
money, what settles each uncertain one). It computes and returns; ``render`` draws the
screen and ``__main__`` is the command. Kept apart so the figures can be tested and
printed as JSON without any of the layout.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from lucyshop import chosen_impl, validate
from lucyshop.approval import APPROVAL_MIGRATIONS, UNCERTAIN
from lucyshop.approval import STATUSES as ORDER_STATUSES
from lucyshop.pids import pid_alive
from lucyshop.queue import QUEUE_MIGRATIONS
from lucyshop.supplier import SupplierClient

WORK_STATES = ("pending", "running", "finished")
RECENT = 5  # finished items listed, newest first
OUTCOME_STATUSES = ("DONE", "BLOCKED", "CANCELED")
HEALTH_TIMEOUT = 2.0
NO_REGISTRY = "no worker registry: process liveness unknown"
LEASES_MISSING = (
    "the chapter-13 leases migration is missing from this shop: no generations, transcript"
    " or outcomes. Any chapter-13 run (open_worker_shop) applies it."
)


# The newest version of each migration line this report knows how to read. The leases line is
# the chapter-13 migration (``LEASE_MIGRATIONS`` in the chapter's file), at version 2
# (version 2 adds the work_open index that claim walks).
KNOWN_VERSIONS = {"queue": max(QUEUE_MIGRATIONS), "approval": max(APPROVAL_MIGRATIONS), "leases": 2}
# The columns the report reads, table by table; the leases ones only once that line is applied.
COLUMNS = {
    "work": ("work_id", "session_id", "worker_id", "state"),
    "assignment_leases": ("work_id", "expires"),
    "assistant_orders": (
        "id",
        "work_id",
        "operation",
        "supplier",
        "status",
        "amount_cents",
        "revoked_by",
    ),
    "spending_account": ("limit_cents", "reserved_cents", "spent_cents"),
}
LEASE_COLUMNS = {
    "assignment_leases": ("generation",),
    "outcomes": ("work_id", "generation", "status", "result"),
}


class ShopUnreadable(Exception):
    """The path is not a shop file this report can read; the message says why."""


# ---------------------------------------------------------------- reading the shop


def open_readonly(path: str | Path) -> tuple[sqlite3.Connection, str]:
    """Open the shop without the right to write it; return the connection and how it was opened.

    ``mode=ro`` never creates a file, so a mistyped path is an error, not a new empty shop.
    Where even that fails (a read-only directory without WAL side files), ``immutable=1`` still
    reads the committed pages, and the returned note says a concurrent writer may be missed.
    """
    target = Path(path)
    if not target.is_file():
        raise ShopUnreadable(f"there is no shop file at {path}")
    uri = target.resolve().as_uri()
    for query, how in (
        ("?mode=ro", "read-only"),
        ("?mode=ro&immutable=1", "read-only, immutable: a concurrent writer may be missed"),
    ):
        try:
            db = sqlite3.connect(uri + query, uri=True)
            db.row_factory = sqlite3.Row
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db, how
        except sqlite3.DatabaseError as error:
            last = error
    raise ShopUnreadable(f"cannot read {path} as SQLite: {last}")


def schema(db: sqlite3.Connection) -> dict[str, int]:
    """Each migration line's recorded version; ShopUnreadable when this is not a shop file."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_versions" not in tables:
        raise ShopUnreadable("this file has no schema_versions table: it is not a shop file")
    versions = {
        r["line"]: r["version"] for r in db.execute("SELECT line, version FROM schema_versions")
    }
    missing = [line for line in ("queue", "approval") if versions.get(line, 0) < 1]
    if missing:
        raise ShopUnreadable(
            f"this shop lacks the {' and '.join(missing)} schema (chapters 8 and 11)"
        )
    for line, known in KNOWN_VERSIONS.items():
        if versions.get(line, 0) > known:
            raise ShopUnreadable(
                f"this shop's {line} schema is at version {versions[line]}, newer than the"
                f" version {known} this report reads: use the kit that wrote it"
            )
    order = {"queue": 0, "approval": 1, "leases": 2}  # the chapters' order, then any others
    return dict(sorted(versions.items(), key=lambda item: (order.get(item[0], 3), item[0])))


def has_leases(db: sqlite3.Connection, versions: dict[str, int]) -> bool:
    """True when the chapter-13 migration is there: the generation column and the outcomes table."""
    columns = {r["name"] for r in db.execute("PRAGMA table_info(assignment_leases)")}
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return versions.get("leases", 0) >= 1 and "generation" in columns and "outcomes" in tables


def intact(db: sqlite3.Connection) -> None:
    """ShopUnreadable unless ``PRAGMA quick_check`` finds the file well formed.

    A shop whose ``-wal`` file was deleted while it ran can be left half-written; its counts
    would still add up to something, so the report checks the structure before it reads them.
    """
    problems = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
    if problems != ["ok"]:
        raise ShopUnreadable(
            "the shop file is malformed (PRAGMA quick_check: " + "; ".join(problems) + ")."
            " Were its -wal or -shm files deleted? They are part of the database."
        )


def check_columns(db: sqlite3.Connection, leases: bool) -> None:
    """ShopUnreadable naming the first table and column the report needs and cannot find."""
    wanted = dict(COLUMNS)
    if leases:
        for table, names in LEASE_COLUMNS.items():
            wanted[table] = wanted.get(table, ()) + names
    for table, names in wanted.items():
        present = {r["name"] for r in db.execute(f"PRAGMA table_info({table})")}
        for name in names:
            if name not in present:
                raise ShopUnreadable(
                    f"the shop's {table} table has no {name} column (renamed or dropped?):"
                    " this is not a shop this report can read"
                )


# ---------------------------------------------------------------- service health


def supplier_health(
    endpoint: str | None, identity: str | None, timeout: float = HEALTH_TIMEOUT
) -> dict:
    """Ask ``GET /health`` once and time it; never raises for a supplier that does not answer."""
    if endpoint is None:
        return {
            "checked": False,
            "endpoint": None,
            "answering": None,
            "latency_ms": None,
            "identity": None,
            "expected_identity": identity,
            "ledger_orders": None,
            "error": None,
        }
    facts: dict[str, Any] = {
        "checked": True,
        "endpoint": endpoint,
        "answering": False,
        "latency_ms": None,
        "identity": None,
        "expected_identity": identity,
        "ledger_orders": None,
        "error": None,
    }
    try:
        client = SupplierClient(endpoint, identity=identity or "supplier", timeout=timeout)
    except ValueError as error:
        return facts | {"error": str(error)}
    started = time.perf_counter()
    try:
        data = client.health()
    except (ConnectionError, ValueError) as error:
        cause = error.__cause__ or error  # the transport's own words, e.g. connection refused
        return facts | {"error": f"{type(cause).__name__}: {cause}"}
    latency = (time.perf_counter() - started) * 1000
    return facts | {
        "answering": True,
        "latency_ms": round(latency, 2),
        "identity": data.get("identity"),
        "ledger_orders": data.get("orders"),
    }


def worker_registry(
    db: sqlite3.Connection, workers_file: str | Path | None
) -> tuple[str | None, dict[str, int]]:
    """Where pids come from (``--workers FILE``, else a ``workers`` table), and owner -> pid."""
    if workers_file is not None:
        try:
            data = json.loads(Path(workers_file).read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ShopUnreadable(f"cannot read the workers file {workers_file}: {error}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and type(v) is int and v > 0 for k, v in data.items()
        ):
            raise ShopUnreadable(
                f"the workers file {workers_file} is not a JSON object of owner -> pid"
            )
        return f"file {workers_file}", dict(sorted(data.items()))
    columns = {r["name"] for r in db.execute("PRAGMA table_info(workers)")}
    if {"owner", "pid"} <= columns:
        pids = {
            str(r["owner"]): r["pid"]
            for r in db.execute("SELECT owner, pid FROM workers ORDER BY owner")
            if type(r["pid"]) is int and r["pid"] > 0
        }
        return "the shop's workers table", pids
    return None, {}


def workers(db: sqlite3.Connection, running: list[dict], workers_file: str | Path | None) -> dict:
    """Registered processes alive or gone, and the holders on record that no pid is known for."""
    holds: dict[str, list[int]] = {}
    for item in running:
        holds.setdefault(item["owner"], []).append(item["work_id"])
    source, pids = worker_registry(db, workers_file)
    processes = [
        {"owner": owner, "pid": pid, "alive": pid_alive(pid), "holds": holds.get(owner, [])}
        for owner, pid in pids.items()
    ]
    unknown = [
        {"owner": owner, "holds": ids} for owner, ids in sorted(holds.items()) if owner not in pids
    ]
    return {
        "source": source,
        "note": None if source else NO_REGISTRY,
        "alive": sum(p["alive"] for p in processes),
        "gone": sum(not p["alive"] for p in processes),
        "processes": processes,
        "holders_without_pid": unknown,
    }


# ---------------------------------------------------------------- work progress


def work_progress(db: sqlite3.Connection, now: float, leases: bool) -> dict:
    """Counts by state and outcome; every running item with its lease as of ``now``."""
    counts = dict.fromkeys(WORK_STATES, 0)
    for row in db.execute("SELECT state, count(*) AS n FROM work GROUP BY state"):
        counts[row["state"]] = row["n"]
    outcomes: dict[str, int] | None = None
    unrecorded = None
    if leases:
        outcomes = dict.fromkeys(OUTCOME_STATUSES, 0)
        for row in db.execute("SELECT status, count(*) AS n FROM outcomes GROUP BY status"):
            outcomes[row["status"]] = row["n"]
        unrecorded = db.execute(
            "SELECT count(*) FROM work w WHERE w.state = 'finished'"
            " AND NOT EXISTS (SELECT 1 FROM outcomes o WHERE o.work_id = w.work_id)"
        ).fetchone()[0]
    generation = "l.generation" if leases else "NULL"
    rows = db.execute(
        f"SELECT w.work_id, w.session_id, w.worker_id, l.expires, {generation} AS generation"
        " FROM work w LEFT JOIN assignment_leases l ON l.work_id = w.work_id"
        " WHERE w.state = 'running' ORDER BY w.work_id"
    ).fetchall()
    running = []
    for row in rows:
        expires = row["expires"]
        running.append(
            {
                "work_id": row["work_id"],
                "session_id": row["session_id"],
                "owner": validate.owner_of(row["worker_id"]),
                "worker_id": row["worker_id"],
                "generation": row["generation"],
                "expires": expires,
                "lease_left": None if expires is None else round(expires - now, 3),
            }
        )
    for item in running:
        # The rule claim() applies: expired, and no other item of its session under a live lease.
        # Compared unrounded, as claim compares them: lease_left is rounded for the screen.
        live_neighbour = any(
            o["session_id"] == item["session_id"]
            and o["work_id"] != item["work_id"]
            and o["expires"] is not None
            and o["expires"] > now
            for o in running
        )
        expired = item["expires"] is not None and item["expires"] <= now
        item["expired"] = expired
        item["eligible_for_takeover"] = expired and not live_neighbour
    outcome = "o.status, o.generation" if leases else "NULL AS status, NULL AS generation"
    recent = [
        dict(r)
        for r in db.execute(
            f"SELECT w.work_id, w.session_id, w.worker_id, {outcome} FROM work w"
            + (" LEFT JOIN outcomes o ON o.work_id = w.work_id" if leases else "")
            + " WHERE w.state = 'finished' ORDER BY w.work_id DESC LIMIT ?",
            (RECENT,),
        )
    ]
    return {
        "counts": counts,
        "outcomes": outcomes,
        "finished_without_outcome": unrecorded,
        "running": running,
        "recently_finished": recent,
    }


# ---------------------------------------------------------------- cancellation


def cancellations(db: sqlite3.Connection, leases: bool) -> list[dict] | None:
    """Each CANCELED outcome: who and why (from its result), and what its orders are now."""
    if not leases:
        return None
    found = []
    for row in db.execute(
        "SELECT work_id, generation, result FROM outcomes WHERE status = 'CANCELED'"
        " ORDER BY work_id"
    ):
        try:
            result = json.loads(row["result"])
        except json.JSONDecodeError:
            result = row["result"]
        said = result if isinstance(result, dict) else {}
        orders = [
            dict(o)
            for o in db.execute(
                "SELECT id AS order_id, operation, status, amount_cents, revoked_by"
                " FROM assistant_orders"
                " WHERE work_id = ? ORDER BY id",
                (row["work_id"],),
            )
        ]
        found.append(
            {
                "work_id": row["work_id"],
                "generation": row["generation"],
                "actor": said.get("actor"),
                "reason": said.get("reason"),
                "result": result,
                "revoked": [o for o in orders if o["status"] == "REVOKED"],
                "left_for_reconcile": [o for o in orders if o["status"] in UNCERTAIN],
            }
        )
    return found


# ---------------------------------------------------------------- external completion


def python_command() -> str:
    """How to spell this interpreter in a command: relative to here when it lives below here."""
    try:
        return str(Path(sys.executable).relative_to(Path.cwd()))
    except ValueError:
        return "python"


def reconcile_command(shop: str, endpoint: str | None, identity: str, impl: str) -> str:
    words = [
        python_command(),
        "-m",
        "lucyshop.lab.reconcile",
        shop,
        "--supplier",
        endpoint or "URL",
        "--identity",
        identity,
        "--impl",
        impl,
    ]
    return " ".join(w if w == "URL" else shlex.quote(w) for w in words)


def external_completion(db: sqlite3.Connection, *, shop: str, health: dict, impl: str) -> dict:
    """Orders by status, the account, and each uncertain order with what settles it."""
    counts = dict.fromkeys(ORDER_STATUSES, 0)
    for row in db.execute("SELECT status, count(*) AS n FROM assistant_orders GROUP BY status"):
        counts[row["status"]] = row["n"]
    money = db.execute(
        "SELECT limit_cents, reserved_cents, spent_cents FROM spending_account"
    ).fetchone()
    # The endpoint belongs to one supplier: use it only for orders addressed to that one.
    known = health["identity"] if health["answering"] else health["expected_identity"]
    uncertain = []
    for row in db.execute(
        "SELECT o.id, o.work_id, o.operation, o.supplier, o.status, o.amount_cents, w.state"
        " FROM assistant_orders o JOIN work w ON w.work_id = o.work_id"
        " WHERE o.status IN ('SENDING', 'UNKNOWN') ORDER BY o.id"
    ):
        endpoint = health["endpoint"] if known in (None, row["supplier"]) else None
        item = {
            "order_id": row["id"],
            "work_id": row["work_id"],
            "work_state": row["state"],
            "status": row["status"],
            "operation": row["operation"],
            "supplier": row["supplier"],
            "reserved_cents": row["amount_cents"],
            "command": None,
        }
        if row["state"] == "finished":
            item["command"] = reconcile_command(shop, endpoint, row["supplier"], impl)
            item["settled_by"] = "reconcile (lookup by operation id; never sends)"
        else:
            item["settled_by"] = "its holder's execute, or recover_once once the lease expires"
        uncertain.append(item)
    return {"counts": counts, "account": dict(money) if money else None, "uncertain": uncertain}


# ---------------------------------------------------------------- the report


def collect(
    shop: str,
    *,
    now: float | None = None,
    supplier: str | None = None,
    identity: str | None = None,
    workers_file: str | None = None,
    impl: str | None = None,
    timeout: float = HEALTH_TIMEOUT,
) -> dict:
    """Every figure of the report, as one JSON-ready dict (what ``--json`` prints)."""
    now = time.time() if now is None else now
    impl = str(chosen_impl(impl))
    health = supplier_health(supplier, identity, timeout)
    db, opened = open_readonly(shop)
    try:
        intact(db)
        versions = schema(db)
        leases = has_leases(db, versions)
        check_columns(db, leases)
        progress = work_progress(db, now, leases)
        report = {
            "shop": shop,
            "opened": opened,
            "now": now,
            "schema": versions,
            "leases_migration": leases,
            "warnings": [] if leases else [LEASES_MISSING],
            "health": {
                "supplier": health,
                "workers": workers(db, progress["running"], workers_file),
            },
            "work": progress,
            "cancellations": cancellations(db, leases),
            "orders": external_completion(db, shop=shop, health=health, impl=impl),
        }
    except sqlite3.DatabaseError as error:
        raise ShopUnreadable(f"cannot read {shop} as a shop: {error}") from None
    finally:
        db.close()
    return report
