"""The six invariants of a soak, each decided from what both SQLite files and the worker logs
hold.

Each invariant is a function of one ``Evidence`` (read back after the run, never taken from
the processes' word) and returns a ``Finding`` naming the work ids that broke it. Read from
files alone, they can be decided on a hand-built shop as well as after a real run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucyshop.proof.soak.shop import read_only
from lucyshop.supplier import ledger_orders

CLOCK_SLACK = 0.002  # SQLite's 'now' has millisecond resolution
UNCERTAIN = ("SENDING", "UNKNOWN")
CONCLUSIVE = ("ACCEPTED", "REJECTED")


@dataclass(frozen=True)
class Finding:
    invariant: str
    ok: bool
    detail: str
    work_ids: tuple[int, ...] = ()


@dataclass
class Evidence:
    """Everything the invariants read: the shop's rows, the ledger's, the workers' logs."""

    items: int  # assignments the run meant to admit
    work: dict[int, str]  # work id -> state
    outcomes: Counter[int]  # work id -> outcome rows
    statuses: Counter[str]  # outcome status -> rows
    orders: list[dict[str, Any]]
    money: dict[str, int]
    writes: list[dict[str, Any]]  # soak_writes: each row's generation and the lease's then
    history: list[dict[str, Any]]  # soak_lease_history: every lease row written, in order
    transcript_rows: int
    ledger: list[dict[str, Any]]
    events: list[dict[str, Any]]
    harness: list[str] = field(default_factory=list)  # admission and drain failures
    crashes: list[str] = field(default_factory=list)  # worker exits nobody caused

    def logged(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("e") == kind]


def read_logs(directory: Path) -> list[dict[str, Any]]:
    """Every worker's observations; a line torn by a SIGKILL mid-write is skipped."""
    events = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append(event | {"log": path.stem})
    return events


def read_evidence(
    shop: Path,
    ledger: Path,
    logs: Path,
    *,
    items: int,
    harness: Iterable[str] = (),
    crashes: Iterable[str] = (),
) -> Evidence:
    """Read the shop and the ledger directly (read-only), and every worker log."""
    with closing(read_only(shop)) as db:

        def rows(sql: str) -> list[dict[str, Any]]:
            return [dict(r) for r in db.execute(sql)]

        money = rows("SELECT reserved_cents, spent_cents FROM spending_account")[0]
        return Evidence(
            items=items,
            work=dict(db.execute("SELECT work_id, state FROM work").fetchall()),
            outcomes=Counter(r[0] for r in db.execute("SELECT work_id FROM outcomes")),
            statuses=Counter(r[0] for r in db.execute("SELECT status FROM outcomes")),
            orders=rows("SELECT * FROM assistant_orders"),
            money=money,
            writes=rows("SELECT * FROM soak_writes ORDER BY id"),
            history=rows("SELECT * FROM soak_lease_history ORDER BY id"),
            transcript_rows=db.execute("SELECT count(*) FROM transcript").fetchone()[0],
            ledger=ledger_orders(ledger),
            events=read_logs(logs),
            harness=list(harness),
            crashes=list(crashes),
        )


def _ids(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(sorted({int(v) for v in values if v is not None}))


def _finding(
    invariant: str, problems: list[str], passed: str, work_ids: Iterable[Any] = ()
) -> Finding:
    return Finding(invariant, not problems, "; ".join(problems) or passed, _ids(work_ids))


def finished_once(ev: Evidence) -> Finding:
    """1. Every assignment finished exactly once, with exactly one outcome row."""
    audited = Counter(w["work_id"] for w in ev.writes if w["kind"] == "outcome")
    bad = [
        w
        for w, state in ev.work.items()
        if state != "finished" or ev.outcomes[w] != 1 or audited[w] != 1
    ]
    bad += [w for w in ev.outcomes if w not in ev.work]
    problems = []
    if len(ev.work) != ev.items:
        problems.append(f"{len(ev.work)} work rows for {ev.items} assignments")
    problems += ev.harness
    if bad:
        problems.append(f"{len(bad)} not finished exactly once, with one outcome")
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(ev.statuses.items()))
    return _finding(
        "every assignment finished exactly once, with exactly one outcome row",
        problems,
        f"{len(ev.work)} of {ev.items}, {statuses}",
        bad,
    )


def _disagreeing(ev: Evidence, shop_ops: dict[str, dict[str, Any]]) -> list[int]:
    """Work ids whose shop order's status (or accepted amount) differs from the ledger's."""
    found = []
    for row in ev.ledger:
        mine = shop_ops.get(row["operation"])
        if mine is not None and (
            mine["status"] != row["status"]
            or (row["status"] == "ACCEPTED" and mine["amount_cents"] != row["amount_cents"])
        ):
            found.append(mine["work_id"])
    return found


def ledger_matches(ev: Evidence) -> Finding:
    """2. One ledger order per accepted (or rejected) operation, none unknown, none twice."""
    shop_ops = {o["operation"]: o for o in ev.orders}
    ledger_ops = Counter(r["operation"] for r in ev.ledger)
    twice = [op for op, n in ledger_ops.items() if n > 1]
    unknown = [op for op in ledger_ops if op not in shop_ops]
    many = [w for w, n in Counter(o["work_id"] for o in ev.orders).items() if n > 1]
    mismatched = _disagreeing(ev, shop_ops)
    missing = [
        o["work_id"]
        for o in ev.orders
        if o["status"] in CONCLUSIVE and o["operation"] not in ledger_ops
    ]
    breaches = (
        (twice, f"operations ordered twice: {twice[:5]}"),
        (unknown, f"{len(unknown)} ledger orders the shop does not know: {unknown[:5]}"),
        (
            mismatched,
            f"{len(mismatched)} orders whose shop status or amount disagrees with the ledger",
        ),
        (missing, f"{len(missing)} orders settled in the shop but absent from the ledger"),
        (many, f"{len(many)} assignments with more than one order"),
    )
    accepted = sum(1 for r in ev.ledger if r["status"] == "ACCEPTED")
    return _finding(
        "the supplier ledger holds one order per accepted operation"
        " and none the shop does not know",
        [message for found, message in breaches if found],
        f"{len(ev.ledger)} orders ({accepted} accepted, {len(ev.ledger) - accepted} rejected), "
        "each once",
        mismatched + missing + many + [shop_ops[op]["work_id"] for op in twice if op in shop_ops],
    )


def money_balances(ev: Evidence) -> Finding:
    """3. Spent cents equal the accepted amounts; reserved cents equal what is still uncertain."""
    accepted_cents = sum(o["amount_cents"] for o in ev.orders if o["status"] == "ACCEPTED")
    ledger_cents = sum(r["amount_cents"] for r in ev.ledger if r["status"] == "ACCEPTED")
    uncertain = [o for o in ev.orders if o["status"] in UNCERTAIN]
    unsent = [o for o in ev.orders if o["status"] == "APPROVED"]
    uncertain_cents = sum(o["amount_cents"] for o in uncertain)
    ledger_ops = {r["operation"] for r in ev.ledger}
    seen = [o for o in uncertain if o["operation"] in ledger_ops]
    spent, reserved = ev.money["spent_cents"], ev.money["reserved_cents"]
    problems = []
    if not spent == accepted_cents == ledger_cents:
        problems.append(
            f"spent {spent}, accepted in the shop {accepted_cents}, "
            f"accepted in the ledger {ledger_cents}"
        )
    if reserved != uncertain_cents:
        problems.append(f"reserved {reserved} but uncertain {uncertain_cents}")
    if seen:
        problems.append(f"{len(seen)} orders still uncertain although the supplier holds them")
    if unsent:
        problems.append(f"{len(unsent)} approved orders of finished work were never sent")
    never_saw = " the supplier never saw" if uncertain else ""
    return _finding(
        "spent cents equal the accepted amounts; reserved cents equal what is still uncertain",
        problems,
        f"spent {spent} = accepted {accepted_cents}; reserved {reserved} = uncertain "
        f"{uncertain_cents} ({len(uncertain)} orders{never_saw})",
        [o["work_id"] for o in uncertain + unsent] if problems else (),
    )


def no_superseded_writes(ev: Evidence) -> Finding:
    """4. No transcript row or outcome was written by a generation that did not hold the lease.

    A transcript row must also go to running work. An outcome is witnessed after its work's
    state may already read finished: the chapter's ``finish`` moves the state first, in the same
    transaction (a second outcome is invariant 1's, and outcomes allow one per work).
    """
    stale = [
        w
        for w in ev.writes
        if w["written_generation"] != w["lease_generation"]
        or (w["kind"] == "transcript" and w["work_state"] != "running")
    ]
    problems = []
    if stale:
        first = stale[0]
        problems.append(
            f"{len(stale)} rows, e.g. the {first['kind']} of work {first['work_id']} written "
            f"by generation {first['written_generation']} while the lease was at generation "
            f"{first['lease_generation']} and the work {first['work_state']}"
        )
    witnessed = sum(1 for w in ev.writes if w["kind"] == "transcript")
    if witnessed != ev.transcript_rows:
        problems.append(f"{ev.transcript_rows} transcript rows but {witnessed} witnessed")
    outcomes = sum(1 for w in ev.writes if w["kind"] == "outcome")
    return _finding(
        "no transcript row or outcome was written by a superseded generation",
        problems,
        f"{witnessed} transcript rows and {outcomes} outcomes, "
        "each written by the generation that held the lease, inside its transaction",
        [w["work_id"] for w in stale],
    )


def _late_sends(ev: Evidence) -> list[dict[str, Any]]:
    """Supplier sends whose ``execute`` began after a newer generation's lease row was written."""
    first_of: dict[int, dict[int, float]] = defaultdict(dict)
    for row in ev.history:
        if row["generation"] is not None:
            first_of[row["work_id"]].setdefault(row["generation"], row["at"])
    late = []
    for e in ev.logged("send"):
        if e.get("gen") is None:
            continue
        newer = [at for g, at in first_of[e["work_id"]].items() if g > e["gen"]]
        if newer and e["t_exec"] > min(newer) + CLOCK_SLACK:
            late.append(e)
    return late


def stale_writes_refused(ev: Evidence) -> Finding:
    """5. Every stale write was refused with PermissionError, and none reached the supplier."""
    writes = ev.logged("write")
    # A probe is made only after the worker read a newer generation, and a scripted write only
    # after the harness saw a newer generation take the work over: both are stale for certain.
    probes = [e for e in writes if e["ok"] and (e.get("probe") or e.get("scripted"))]
    late, errors = _late_sends(ev), ev.logged("error")
    problems = []
    if probes:
        e = probes[0]
        problems.append(
            f"{len(probes)} writes accepted from a claim already superseded, e.g. the "
            f"{e['b']} write of work {e['work_id']} by generation {e['gen']} ({e['log']})"
        )
    if late:
        e = late[0]
        problems.append(
            f"{len(late)} supplier sends by a superseded generation, e.g. work "
            f"{e['work_id']} generation {e['gen']} ({e['log']})"
        )
    if errors:
        e = errors[0]
        problems.append(
            f"{len(errors)} writes failed with something other than PermissionError, e.g. "
            f"{e['type']}: {e['message']} (work {e['work_id']} generation {e['gen']}, {e['log']})"
        )
    if ev.crashes:
        problems.append(f"{len(ev.crashes)} worker crashes, e.g. {ev.crashes[0][:400]}")
    refused = sum(1 for e in writes if not e["ok"])
    return _finding(
        "every stale write was refused by the fence",
        problems,
        f"{refused} refused, no stale write reached the database or the supplier",
        [e["work_id"] for e in probes + late + errors],
    )


def generations_step_by_one(ev: Evidence) -> Finding:
    """6. Each claim advanced the lease generation by exactly one: 1, 2, 3, ... per work id."""
    by_work: dict[int, list[Any]] = defaultdict(list)
    for row in ev.history:
        by_work[row["work_id"]].append(row["generation"])
    jumps = [
        w
        for w, gens in by_work.items()
        if any(type(g) is not int for g in gens) or gens != list(range(1, len(gens) + 1))
    ]
    highest = max((len(v) for v in by_work.values()), default=0)
    return _finding(
        "each claim advanced the lease generation by exactly one",
        [f"{len(jumps)} assignments whose generations were not 1, 2, 3, ..."] if jumps else [],
        f"{len(ev.history)} claims, highest generation {highest}",
        jumps,
    )


INVARIANTS: tuple[Callable[[Evidence], Finding], ...] = (
    finished_once,
    ledger_matches,
    money_balances,
    no_superseded_writes,
    stale_writes_refused,
    generations_step_by_one,
)


def findings(ev: Evidence) -> list[Finding]:
    """Every invariant's finding, in order."""
    return [invariant(ev) for invariant in INVARIANTS]
