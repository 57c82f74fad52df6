"""How the report looks: the plain-text screen drawn from ``collect``'s figures.

Four sections, aligned, at most 80 columns where the data allows; every string from the
records escaped first, so nothing stored can steer the operator's terminal. It reads only
the dict ``signals.collect`` returns (``--json`` prints that same dict), so a change of
layout never changes a figure.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from datetime import UTC, datetime
from typing import Any

from lucyshop.approval import STATUSES as ORDER_STATUSES
from lucyshop.status.signals import OUTCOME_STATUSES, RECENT, WORK_STATES

WIDTH = 80


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
    health = (
        "healthy" if expected in (None, who) else f"answering as {who}, NOT the expected {expected}"
    )
    return wrap(
        "supplier",
        f"{health}: {who} answered /health in {s['latency_ms']:.1f} ms,"
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
