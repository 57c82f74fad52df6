"""One screen about one shop, computed from its records at the moment you ask.

    python -m lucyshop status SHOP_DB [--supplier URL] [--identity NAME] [--workers FILE]
                                      [--impl learner|solutions|PATH] [--json]

Four signals, each read fresh from the shop file (opened read-only) or measured now:

- **service health**: does the supplier answer ``/health``, and how fast; which worker
  processes are alive, and which recorded holders' processes are gone. The shop records
  holders by owner label only, so liveness needs pids from somewhere: ``--workers FILE``
  (JSON ``{"owner": pid}``) or a ``workers(owner, pid)`` table if the shop has one. Without
  either the report says liveness is unknown rather than guess.
- **work progress**: work by state and outcome; every running item with its owner,
  generation and the seconds of lease left, or that it expired and may be taken over.
- **cancellation**: cancelled work, who cancelled it and why, and what was revoked.
- **external completion**: orders by status and the money; every SENDING or UNKNOWN order
  with its operation id, the cents it keeps reserved and what settles it (for finished work,
  the exact ``python -m lucyshop.lab.reconcile`` command).

Nothing here writes to the shop, and nothing here implements a chapter-13 function: the
report reads the tables those functions write.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from lucyshop import IMPL_ENV, validate
from lucyshop.approval import APPROVAL_MIGRATIONS, UNCERTAIN
from lucyshop.approval import STATUSES as ORDER_STATUSES
from lucyshop.queue import QUEUE_MIGRATIONS
from lucyshop.supplier import SupplierClient

WIDTH = 80
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
        "order_id",
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


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs on this machine now (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except (psutil.NoSuchProcess, ValueError, OverflowError):
        return False
    except psutil.AccessDenied:
        return True  # it exists, under another user


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
                "SELECT order_id, operation, status, amount_cents, revoked_by FROM assistant_orders"
                " WHERE work_id = ? ORDER BY order_id",
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
        "SELECT o.order_id, o.work_id, o.operation, o.supplier, o.status, o.amount_cents, w.state"
        " FROM assistant_orders o JOIN work w ON w.work_id = o.work_id"
        " WHERE o.status IN ('SENDING', 'UNKNOWN') ORDER BY o.order_id"
    ):
        endpoint = health["endpoint"] if known in (None, row["supplier"]) else None
        item = {
            "order_id": row["order_id"],
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
    impl = impl or os.environ.get(IMPL_ENV) or "learner"
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


def seconds(value: float) -> str:
    """``39.0s`` up to two minutes, then minutes, hours or days: a stale lease can be years old.

    Each form rounds once, to its smallest unit, before splitting: 599.6 s is ``10m 00s``.
    """
    if round(value, 1) < 120:
        return f"{value:.1f}s"
    if round(value) < 7200:
        whole = round(value)
        return f"{whole // 60}m {whole % 60:02d}s"
    if round(value / 60) < 2880:
        minutes = round(value / 60)
        return f"{minutes // 60}h {minutes % 60:02d}m"
    return f"{round(value / 86400)} days"


def cents(value: int) -> str:
    return f"{value} cents"


def counted(counts: dict[str, int], order: tuple[str, ...]) -> str:
    """``ACCEPTED 1, UNKNOWN 1``: the statuses present, in the lifecycle's order."""
    present = [f"{k} {counts[k]}" for k in order if counts.get(k)]
    return ", ".join(present) if present else "none"


def wrap(label: str, text: str, indent: int = 12) -> list[str]:
    """``label`` then ``text`` wrapped to the screen, continuation lines under the text."""
    first = f"  {label:<{indent - 2}}"
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def command_lines(command: str, indent: int) -> list[str]:
    """A shell command over as many lines as it needs, broken before an option, `` \\`` joined."""
    groups: list[str] = []
    for word in shlex.split(command):
        shown = word if word == "URL" else shlex.quote(word)
        if groups and not word.startswith("--"):
            groups[-1] += f" {shown}"  # the program and its arguments, or an option's value
        else:
            groups.append(shown)
    lines = [groups[0]]
    for group in groups[1:]:
        if indent + len(lines[-1]) + 1 + len(group) + 2 > WIDTH:
            lines[-1] += " \\"
            lines.append("  " + group)
        else:
            lines[-1] += f" {group}"
    return [" " * indent + text for text in lines]


def escaped(value: Any) -> Any:
    """``value`` with every string made safe for a terminal, at any depth.

    A control character stored in a label (ESC, say) would otherwise reach the operator's
    screen as a command; each one, and anything else unprintable, is shown as its escape.
    """
    if isinstance(value, str):
        return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in value)
    if isinstance(value, dict):
        return {k: escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(v) for v in value]
    return value


def header(report: dict) -> list[str]:
    at = datetime.fromtimestamp(report["now"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    versions = ", ".join(f"{line} {v}" for line, v in report["schema"].items())
    out = [
        f"status of {report['shop']}",
        f"  at {at}, opened {report['opened']}",
        f"  schema {versions}",
    ]
    for warning in report["warnings"]:
        out += [""] + wrap("WARNING", warning, 11)
    return out


def supplier_lines(s: dict) -> list[str]:
    if not s["checked"]:
        return wrap("supplier", "not checked (pass --supplier URL)")
    if not s["answering"]:
        return wrap("supplier", f"not answering at {s['endpoint']}: {s['error']}")
    who, expected = s["identity"] or "?", s["expected_identity"]
    verdict = (
        "healthy" if expected in (None, who) else f"answering as {who}, NOT the expected {expected}"
    )
    return wrap(
        "supplier",
        f"{verdict}: {who} answered /health in {s['latency_ms']:.1f} ms,"
        f" {s['ledger_orders']} orders in its ledger, at {s['endpoint']}",
    )


def worker_lines(w: dict) -> list[str]:
    if w["source"] is None:
        out = wrap("workers", w["note"])
    else:
        out = wrap(
            "workers",
            f"{w['alive']} alive, {w['gone']} gone (pids from {w['source']},"
            " checked on this machine)",
        )
    width = max([len(p["owner"]) for p in w["processes"]], default=0)
    for p in w["processes"]:
        held = f"holds work {', '.join(map(str, p['holds']))}" if p["holds"] else "holds nothing"
        out.append(
            f"{'':12}{p['owner']:<{width}}  pid {p['pid']:<7}  "
            f"{'alive' if p['alive'] else 'GONE':<5}  {held}"
        )
    holders = w["holders_without_pid"]
    if holders or w["source"] is None:
        listed = ", ".join(
            f"{h['owner']} (work {', '.join(map(str, h['holds']))})" for h in holders
        )
        label = "holders on record" if w["source"] is None else "no pid for holders"
        out += wrap("", f"{label}: {listed or 'none'}")
    return out


def items_line(work: dict) -> list[str]:
    line = ", ".join(f"{state} {work['counts'][state]}" for state in WORK_STATES)
    if work["outcomes"] is not None and work["counts"]["finished"]:
        detail = (
            [counted(work["outcomes"], OUTCOME_STATUSES)] if any(work["outcomes"].values()) else []
        )
        if work["finished_without_outcome"]:
            detail.append(f"{work['finished_without_outcome']} without an outcome")
        line += f" ({', '.join(detail)})"
    return wrap("items", line)


def lease_text(item: dict) -> str:
    if item["lease_left"] is None:
        return "no lease on record"
    if not item["expired"]:
        return f"{seconds(item['lease_left'])} left"
    ago = seconds(-item["lease_left"])
    if item["eligible_for_takeover"]:
        return f"expired {ago} ago, eligible for takeover"
    return f"expired {ago} ago; its session has a live holder"


def table(title: str, columns: tuple[tuple[str, str], ...], rows: list[list]) -> list[str]:
    """A titled table: each column's heading and alignment (``>`` or ``<``), its cells as wide
    as the widest of them; the last column runs free."""
    headings = [heading for heading, _ in columns]
    widths = [max(len(str(cell)) for cell in column) for column in zip(headings, *rows)]

    def line(cells: list) -> str:
        fixed = [
            f"{cell!s:{align}{width}}"
            for cell, (_, align), width in zip(cells[:-1], columns, widths, strict=False)
        ]
        return "  " + "  ".join([*fixed, str(cells[-1])])

    return ["", title, line(headings), *map(line, rows)]


def running_lines(running: list[dict]) -> list[str]:
    if not running:
        return []
    columns = (("work", ">"), ("session", "<"), ("owner", "<"), ("gen", ">"), ("lease", "<"))
    rows = [
        [i["work_id"], i["session_id"], i["owner"], dash(i["generation"]), lease_text(i)]
        for i in running
    ]
    return table("  running, with the lease as of now:", columns, rows)


def finished_lines(recent: list[dict]) -> list[str]:
    if not recent:
        return []
    columns = (
        ("work", ">"),
        ("session", "<"),
        ("outcome", "<"),
        ("gen", ">"),
        ("finished by", "<"),
    )
    rows = [
        [
            i["work_id"],
            i["session_id"],
            dash(i["status"]),
            dash(i["generation"]),
            dash(i["worker_id"]),
        ]
        for i in recent
    ]
    return table(f"  finished, newest first (at most {RECENT}):", columns, rows)


def dash(value: Any) -> Any:
    return "-" if value is None else value


def cancellation_lines(cancelled: list[dict] | None) -> list[str]:
    if cancelled is None:
        return wrap("", "unknown: no outcomes table (the leases migration is missing)", 2)
    if not cancelled:
        return wrap("", "no cancelled work", 2)
    out = []
    for c in cancelled:
        who = c["actor"] or "? (not in its result)"
        why = json.dumps(c["reason"]) if c["reason"] is not None else "? (no reason in its result)"
        out += wrap(
            f"work {c['work_id']}", f"cancelled by {who} at generation {c['generation']}: {why}"
        )
        out += revoked_lines("revoked", c["revoked"], "released")
        out += revoked_lines("uncertain", c["left_for_reconcile"], "still reserved")
    return out


def revoked_lines(label: str, orders: list[dict], note: str) -> list[str]:
    if not orders:
        return [f"{'':12}{label:<10}none"]
    out = []
    for o in orders:
        said = note if label == "revoked" else f"{o['status']}, {note}"
        out.append(f"{'':12}{label:<10}order {o['order_id']}, {cents(o['amount_cents'])} {said}")
        out.append(f"{'':22}{o['operation']}")
        label = ""
    return out


def completion_lines(orders: dict) -> list[str]:
    total = sum(orders["counts"].values())
    out = wrap("orders", f"{total}: {counted(orders['counts'], ORDER_STATUSES)}")
    if money := orders["account"]:
        out += wrap(
            "account",
            f"limit {money['limit_cents']}, reserved {money['reserved_cents']},"
            f" spent {money['spent_cents']} (cents)",
        )
    if not orders["uncertain"]:
        out += wrap("uncertain", "none: every order sent has a conclusive receipt")
    for o in orders["uncertain"]:
        out += uncertain_lines(o)
    return out


def uncertain_lines(o: dict) -> list[str]:
    out = [
        (
            f"  order {o['order_id']:<4} {o['status']:<8} work {o['work_id']} ({o['work_state']}),"
            f" {cents(o['reserved_cents'])} reserved, supplier {o['supplier']}"
        ),
        f"{'':4}{'operation':<11}{o['operation']}",
    ]
    if not o["command"]:
        return out + [f"{'':4}{'settle':<11}{o['settled_by']}"]
    out.append(f"{'':4}{'settle':<11}" + "\n".join(command_lines(o["command"], 15)).lstrip())
    if "--supplier URL" in o["command"]:
        out.append(
            f"{'':15}(URL: where supplier {o['supplier']} listens, e.g. http://127.0.0.1:PORT)"
        )
    return out


def render(report: dict) -> str:
    """The plain-text screen: four sections, aligned, at most 80 columns where the data allows.

    Every string from the records is escaped first, so nothing stored can steer the terminal.
    """
    report = escaped(report)
    health, work = report["health"], report["work"]
    out = header(report)
    out += ["", "SERVICE HEALTH", *supplier_lines(health["supplier"])]
    out += worker_lines(health["workers"])
    out += ["", "WORK PROGRESS", *items_line(work)]
    out += running_lines(work["running"]) + finished_lines(work["recently_finished"])
    out += ["", "CANCELLATION", *cancellation_lines(report["cancellations"])]
    out += ["", "EXTERNAL COMPLETION", *completion_lines(report["orders"])]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shop", metavar="SHOP_DB", help="the shop's SQLite file (opened read-only)")
    parser.add_argument(
        "--supplier", metavar="URL", help="check this supplier's /health (http://host:port)"
    )
    parser.add_argument(
        "--identity", metavar="NAME", help="the supplier identity expected at --supplier"
    )
    parser.add_argument(
        "--workers", metavar="FILE", help='JSON {"owner": pid} of the worker processes'
    )
    parser.add_argument(
        "--impl",
        help="implementation the printed reconcile commands use"
        " (default $LEASES_IMPL, else learner)",
    )
    parser.add_argument(
        "--timeout", type=float, default=HEALTH_TIMEOUT, help="seconds for /health (default 2)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the figures as JSON, for scripts"
    )
    parser.add_argument("--now", type=float, help=argparse.SUPPRESS)  # tests: a stable clock


def run(args: argparse.Namespace) -> int:
    try:
        report = collect(
            args.shop,
            now=args.now,
            supplier=args.supplier,
            identity=args.identity,
            workers_file=args.workers,
            impl=args.impl,
            timeout=args.timeout,
        )
    except ShopUnreadable as error:
        print(f"status: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        sys.stdout.write(render(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop status", description=__doc__.split("\n", 1)[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
