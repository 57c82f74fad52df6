"""The checkpoints' result, computed by a process that never imports the student's file.

    python -m lucyshop.lab.checkpoint.judge --evidence FILE --keep DIR [--postgres]

The checkpoints (``checkpoints/ch13_worker_recovery.py``, ``ch13_postgres_recovery.py``) run
the student's code in sandboxes and never import it; still, a checkpoint's own "pass" is never
enough. A case passes here only when the evidence file records it as passed *and* the files
kept for it hold what a correct run leaves behind: for SQLite, the shop file under
``DIR/caseN``; for PostgreSQL, the tables the trusted side read back on its own connection,
kept as ``DIR/caseN-kept/tables.json``; for both, the supplier's ledger under
``DIR/caseN-kept/supplier``. Everything under ``caseN-kept`` is out of the sandbox's reach, and
all of it is read as regular files only, bounded. A case with no record, or one that started
and never finished (``os._exit``, a crash, the deadline), fails and says so.

Exit status: 0 PASSING, 1 FAILING, 3 NOT STARTED.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lucyshop.atomic import read_regular
from lucyshop.lab.checkpoint.cases import (
    ARITHMETIC,
    CANCEL,
    CASES,
    FENCE,
    KILLED,
    LIVE_STALE,
    ON_POSTGRES,
    PAUSED,
    POST_COMMIT,
    Case,
)
from lucyshop.lab.checkpoint.rival import WRITERS, problems_in
from lucyshop.lab.sandbox.remote import confined_file
from lucyshop.lab.statuses import CaseResult, CheckpointStatus, Mark, result_line
from lucyshop.supplier import ledger_orders

EXIT = {CheckpointStatus.PASSING: 0, CheckpointStatus.FAILING: 1, CheckpointStatus.NOT_STARTED: 3}
MAX_EVIDENCE = 16 * 1024 * 1024
TABLES = "tables.json"  # a PostgreSQL case's tables, as the trusted side read them back


Rule = Callable[[Path, dict[str, Any]], None]  # (the case's directory, its record)


class Wrong(Exception):
    """What the kept files show that a correct run would not have left."""


def expect(what: str, seen: Any, expected: Any) -> None:
    if seen != expected:
        raise Wrong(f"{what}: expected {expected!r}, the kept files hold {seen!r}")


def kept_directory(case: Path) -> Path:
    """What the trusted side keeps of a case (the supplier's ledger, the holder's stderr):
    beside the case's directory, never in it, because the case's directory is the sandbox's
    scratch and what is judged or written by the trusted side must stay out of its reach."""
    return case.parent / f"{case.name}-kept"


def supplier_directory(case: Path) -> Path:
    """Where a case's supplier keeps its ledger."""
    return kept_directory(case) / "supplier"


def kept_file(path: Path, within: Path) -> Path:
    """``path`` if it is a regular file (not a link, not a FIFO) inside ``within``."""
    try:
        return confined_file(path, [within.resolve()])
    except ValueError as error:
        raise Wrong(str(error)) from None


def shop(directory: Path) -> sqlite3.Connection:
    path = directory / "shop.db"
    if not path.is_file():
        raise Wrong(f"no shop file was kept at {path}")
    db = sqlite3.connect(kept_file(path, directory).as_uri() + "?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def ledger(directory: Path) -> list[str]:
    where = supplier_directory(directory)
    files = sorted(where.glob("*-ledger.sqlite"))
    if len(files) != 1:
        raise Wrong(f"expected one supplier ledger under {where}, found {files}")
    return [row["operation"] for row in ledger_orders(kept_file(files[0], where))]


def read_evidence(path: Path, limit: int = MAX_EVIDENCE) -> Any:
    """The evidence, read only as a regular file of at most ``limit`` bytes (never through a
    link, never blocking on a FIFO)."""
    return json.loads(read_regular(path, limit).decode("utf-8"))


def rows(db: sqlite3.Connection, sql: str, *args: Any) -> list[tuple]:
    return [tuple(row) for row in db.execute(sql, args)]


# ------------------------------------------------------------------ each case's files


def arithmetic(_directory: Path, facts: dict[str, Any]) -> None:
    """No files: the three figures the evidence records must be the ones worked out by hand."""
    expect("p50 of the ten turns", facts.get("p50"), 0.7)
    expect("p90 of the ten turns", facts.get("p90"), 1.2)
    delay = facts.get("detection_delay")
    if not isinstance(delay, int | float) or not math.isclose(delay, 3.6, rel_tol=1e-9):
        raise Wrong(f"detection_delay(4.0, 1.0, 0.2): expected 3.6, the evidence holds {delay!r}")


def fence(directory: Path, _facts: dict[str, Any]) -> None:
    with shop(directory) as db:
        work = rows(db, "SELECT work_id, state FROM work ORDER BY work_id")
        expect("work items", [state for _id, state in work], ["finished", "running"])
        first, second = (work_id for work_id, _state in work)
        expect(
            "outcome of the first turn",
            rows(db, "SELECT generation, status FROM outcomes WHERE work_id = ?", first),
            [(2, "DONE")],
        )
        expect(
            "transcript generations of the first turn",
            rows(db, "SELECT generation FROM transcript WHERE work_id = ?", first),
            [(2,)],
        )
        expect(
            "lease generations (first, second turn)",
            rows(db, "SELECT generation FROM assignment_leases ORDER BY work_id"),
            [(2,), (1,)],
        )
        expect(
            "second turn's outcome",
            rows(db, "SELECT 1 FROM outcomes WHERE work_id = ?", second),
            [],
        )
    for writer in WRITERS:  # the copies a rival took the second turn over in, kept beside
        home = kept_directory(directory) / f"rival-{writer}"
        runs = [kept_file(path, home) for path in sorted(home.glob("run-*.db"))]
        problems = problems_in(runs, f"{writer}'s write")
        if problems:
            raise Wrong(f"{writer}() beside a rival: {problems[0]}")


def settled(directory: Path, _facts: dict[str, Any]) -> None:
    """One order at the supplier, the money moved once, generation 2 finished DONE."""
    with shop(directory) as db:
        expect("work", rows(db, "SELECT state FROM work"), [("finished",)])
        expect("outcome", rows(db, "SELECT generation, status FROM outcomes"), [(2, "DONE")])
        expect("transcript rows", rows(db, "SELECT count(*) FROM transcript"), [(0,)])
        orders = rows(db, "SELECT operation, status, amount_cents FROM assistant_orders")
        expect("order statuses", [status for _op, status, _c in orders], ["ACCEPTED"])
        operation, _status, amount = orders[0]
        expect("supplier ledger operations", ledger(directory), [operation])
        expect(
            "money (reserved, spent)",
            rows(db, "SELECT reserved_cents, spent_cents FROM spending_account"),
            [(0, amount)],
        )


def cancel(directory: Path, _facts: dict[str, Any]) -> None:
    """Cancelled at generation 2; the sent order reconciled ACCEPTED, the unsent one REVOKED."""
    with shop(directory) as db:
        expect("work", rows(db, "SELECT state FROM work"), [("finished",)])
        expect("outcome", rows(db, "SELECT generation, status FROM outcomes"), [(2, "CANCELED")])
        expect("lease generation", rows(db, "SELECT generation FROM assignment_leases"), [(2,)])
        orders = rows(
            db, "SELECT operation, status, amount_cents FROM assistant_orders ORDER BY id"
        )
        expect("order statuses", [status for _op, status, _c in orders], ["ACCEPTED", "REVOKED"])
        expect("supplier ledger operations", ledger(directory), [orders[0][0]])
        expect(
            "money (reserved, spent)",
            rows(db, "SELECT reserved_cents, spent_cents FROM spending_account"),
            [(0, orders[0][2])],
        )


def pg_settled(directory: Path, _facts: dict[str, Any]) -> None:
    """On PostgreSQL: generation 1 recorded the order it meant to send and nothing after;
    generation 2 recorded its receipt and finished DONE; the supplier holds that one order."""
    kept = kept_directory(directory)
    tables = read_evidence(kept_file(kept / TABLES, kept))
    if not isinstance(tables, dict):
        raise Wrong(f"{TABLES} is not a table of tables")
    expect(
        "outcome",
        [(o["generation"], o["status"]) for o in tables["outcomes"]],
        [(2, "DONE")],
    )
    expect("lease generation", [lease["generation"] for lease in tables["leases"]], [2])
    transcript = [(row["generation"], row["message"]) for row in tables["transcript"]]
    expect(
        "transcript rows by generation (an intent by 1, a receipt by 2, nothing later by 1)",
        [(generation, sorted(message)) for generation, message in transcript],
        [(1, ["intent"]), (2, ["receipt"])],
    )
    expect("supplier ledger operations", ledger(directory), [transcript[0][1]["intent"]])


# What each case's kept files must hold, by case name: the SQLite checkpoint's, and exercise
# 7's on PostgreSQL.
RULES: dict[str, Rule] = {
    ARITHMETIC.name: arithmetic,
    FENCE.name: fence,
    KILLED.name: settled,
    LIVE_STALE.name: settled,
    PAUSED.name: settled,
    POST_COMMIT.name: settled,
    CANCEL.name: cancel,
}
POSTGRES_RULES = {case.name: pg_settled for case in ON_POSTGRES}


# ------------------------------------------------------------------ the result


def judge_case(
    number: int, name: str, record: Any, keep: Path, rules: Mapping[str, Rule] = RULES
) -> Case:
    """One case: its record must say pass, and its kept files must agree."""
    if not isinstance(record, dict):
        return Case(number, name, False, "no record: the checkpoint never reached this case")
    result = record.get("result")
    if result == CaseResult.STARTED:
        return Case(
            number,
            name,
            False,
            "the checkpoint process ended inside this case (os._exit, a crash or its deadline)",
        )
    if result != CaseResult.PASSING:
        return Case(number, name, False, str(record.get("message") or result))
    try:
        rules[name](keep / f"case{number}", record)
    except Wrong as wrong:
        return Case(number, name, False, f"the evidence says pass, but {wrong}")
    except (sqlite3.Error, OSError, ValueError, TypeError, KeyError, IndexError) as error:
        return Case(number, name, False, f"its kept files cannot be read: {error}")
    return Case(number, name, True, "confirmed by its kept shop and supplier files")


def judge(
    evidence: Path, keep: Path, rules: Mapping[str, Rule] = RULES
) -> tuple[CheckpointStatus, list[Case]]:
    """(PASSING | FAILING | NOT STARTED, one Case per case ``rules`` judges, in the list's
    order): the SQLite checkpoint's by default, ``POSTGRES_RULES`` for exercise 7's, or a
    part of either (a run of chosen cases)."""
    judged = [case for case in CASES if case.name in rules]
    try:
        recorded = read_evidence(evidence).get("cases", {})
    except (OSError, ValueError, AttributeError) as error:
        failed = f"no readable evidence at {evidence}: {error}"
        return CheckpointStatus.FAILING, [Case(c.number, c.name, False, failed) for c in judged]
    if not isinstance(recorded, dict):
        recorded = {}
    cases = [judge_case(c.number, c.name, recorded.get(c.name), keep, rules) for c in judged]
    return overall(
        CaseResult.PASSING if case.passed else _unpassed(recorded.get(case.name)) for case in cases
    ), cases


def overall(results: Iterable[str]) -> CheckpointStatus:
    """PASSING when every case passed; NOT STARTED when each case that did not stopped at a
    stub; else FAILING."""
    unpassed = {result for result in results if result != CaseResult.PASSING}
    if not unpassed:
        return CheckpointStatus.PASSING
    if unpassed == {CaseResult.NOT_STARTED}:
        return CheckpointStatus.NOT_STARTED
    return CheckpointStatus.FAILING


def said(status: CheckpointStatus) -> str:
    """A checkpoint child's last line: its own word, lower case where it claims a pass, since
    only the judge's PASSING counts."""
    return "checkpoint passed" if status is CheckpointStatus.PASSING else f"checkpoint {status}"


def _unpassed(record: Any) -> CaseResult:
    """A case that did not pass: NOT STARTED only when its own record says it stopped at a
    stub."""
    stub = isinstance(record, dict) and record.get("result") == CaseResult.NOT_STARTED
    return CaseResult.NOT_STARTED if stub else CaseResult.FAILING


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.checkpoint.judge", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--evidence", type=Path, required=True)
    parser.add_argument("--keep", type=Path, required=True)
    parser.add_argument("--json", action="store_true", help="print the cases as JSON")
    parser.add_argument(
        "--postgres", action="store_true", help="exercise 7's checkpoint (on PostgreSQL)"
    )
    args = parser.parse_args(argv)
    status, cases = judge(args.evidence, args.keep, POSTGRES_RULES if args.postgres else RULES)
    if args.json:
        print(json.dumps({"status": status, "cases": [asdict(c) for c in cases]}, indent=2))
    else:
        for case in cases:
            mark = Mark.PASS if case.passed else Mark.FAIL
            print(result_line(mark, f"{case.case} {case.name}", case.message))
        print(f"checkpoint {status}")
    return EXIT[status]


if __name__ == "__main__":
    sys.exit(main())
