"""Exercise 7 checkpoint: kill and out-live real workers on PostgreSQL, and recover their work.

    python checkpoints/ch13_postgres_recovery.py [--impl learner|solutions|PATH] [--lease 2]

Runs your ``ch13_postgres.py`` (beside the chapter file ``--impl`` names) with the reference
solutions blocked, in this process and in every worker. One PostgreSQL server
(``$LUCYSHOP_PG_DSN``, else an embedded one, stopped at the end); each case gets a schema of
its own and a supplier process whose ledger (its own SQLite file) is read independently.

1. killed      a worker claims the work, records the order it intends to send, and is
               SIGKILLed; the replacement waits until the *server* says the lease ran out,
               sends the order under its own generation (the supplier keeps one order per
               operation id), and finishes.
2. live stale  the same, but the old worker stays alive; after the takeover it tries its
               transcript, its completion and the supplier send: each must be refused, and
               the supplier's ledger must still hold one order.

The supplier send is fenced the way exercise 7 fences a write: ``assert_current`` inside the
transaction that records the receipt, which keeps the lease row locked until it commits.
Exit status: 0 passed, 1 failed, 3 a function is still a stub.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import KILLED, LIVE_STALE
from lucyshop.lab.checkpoint.checks import child_record, expect
from lucyshop.lab.checkpoint.judge import EXIT, overall, said
from lucyshop.lab.given import pg_shop
from lucyshop.lab.given.orders import OWNER, VANILLA
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import add_impl_option, block_reference, impl_path
from lucyshop.lab.sandbox.inside.holder import refusal
from lucyshop.lab.services.postgres import missing, postgres_server, scratch_schema
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    wait_exit,
    wait_for_file,
    wait_until,
    write_ready,
)
from lucyshop.lab.services.suppliers import supplier_process
from lucyshop.lab.statuses import CaseResult
from lucyshop.supplier import SupplierClient, ledger_orders

HERE = Path(__file__).resolve()
DEADLINE = 30.0  # seconds any single wait may take before the case fails
# The SQLite checkpoint's two process cases, on PostgreSQL: (number here, name, holder mode).
CASES = ((1, KILLED.name, "killed"), (2, LIVE_STALE.name, "live"))


def send_fenced(pg: Any, conn: Any, held: Any, client: SupplierClient, operation: str) -> dict:
    """Send the order only as the current holder, and record its receipt in the same
    transaction: the lease row stays locked from the check to the commit."""
    with conn.transaction():
        pg.assert_current(conn, held)
        receipt = client.order(operation, VANILLA)
        pg.observe(conn, held, {"receipt": receipt})
    return receipt


def intended(conn: Any, work_id: int) -> list[str]:
    """The operation ids the records say this work meant to send, oldest first."""
    rows = conn.execute(
        "SELECT message->>'intent' AS operation FROM transcript"
        " WHERE work_id = %s AND message ? 'intent' ORDER BY seq",
        (work_id,),
    ).fetchall()
    return [r["operation"] for r in rows]


def recover(
    pg: Any, conn: Any, client: SupplierClient, lease: float
) -> tuple[Any, list[str], float]:
    """Wait until the server lets a claim through, then continue from the records alone."""
    started = time.monotonic()
    held = wait_until(
        lambda: pg.claim(conn, OWNER, ttl=lease * 5),
        timeout=lease + DEADLINE,
        interval=0.05,
        what="the server to let a replacement claim the work",
    )
    waited = round(time.monotonic() - started, 3)
    sent = []
    for operation in intended(conn, held.work_id):
        if client.lookup(operation) is None:  # the supplier never saw it: send it now
            send_fenced(pg, conn, held, client, operation)
            sent.append(operation)
    pg.finish(conn, held, "DONE", {"sent": sent})
    return held, sent, waited


def case(pg: Any, server: Any, directory: Path, lease: float, mode: str) -> dict[str, Any]:
    """One holder child in ``mode`` (killed or live) and one replacement, on fresh records."""
    with (
        scratch_schema(server, "checkpoint") as dsn,
        supplier_process(directory / "supplier") as supplier,
        SharedGroupChildren() as children,
        pg_shop.connect(dsn) as conn,
    ):
        pg_shop.create_shop(dsn)
        work_id = pg_shop.add_work(conn, "session-a", "Order six tubs of vanilla")
        argv = [sys.executable, str(HERE), "--child", mode, "--dsn", dsn, "--dir", str(directory)]
        argv += ["--endpoint", supplier.endpoint, "--identity", supplier.identity]
        argv += ["--lease", str(lease), "--impl", str(pg_shop_file(pg))]
        child = children.spawn(argv)
        ready = child_record(child, directory / "ready.json", timeout=DEADLINE)
        expect("holder's claim", (ready["work_id"], ready["generation"]), (work_id, 1))
        expect("a competing claim while the lease is alive", pg.claim(conn, "rival", ttl=1), None)
        if mode == "killed":
            child.send_signal(signal.SIGKILL)
            expect("holder exit status", wait_exit(child, timeout=DEADLINE), -signal.SIGKILL)
        client = supplier.client(timeout=5.0)
        held, sent, waited = recover(pg, conn, client, lease)
        expect("replacement", (held.work_id, held.generation), (work_id, 2))
        expect("the replacement sent the intended order", sent, [ready["operation"]])
        facts = {"generations": [1, held.generation], "waited_seconds": waited}
        if mode == "live":
            write_ready(directory / "release.json", {"released": True})
            stale = child_record(child, directory / "stale.json", timeout=DEADLINE)
            expect("holder exit status", wait_exit(child, timeout=DEADLINE), 0)
            refused = sorted(k for k, v in stale.items() if v.startswith("PermissionError"))
            expect("stale writes refused", refused, ["completion", "supplier", "transcript"])
            facts["stale"] = stale
        ledger = [row["operation"] for row in ledger_orders(supplier.database)]
        expect("supplier ledger (its own file)", ledger, [ready["operation"]])
        outcome = conn.execute("SELECT generation, status FROM outcomes").fetchall()
        expect("outcome", [(o["generation"], o["status"]) for o in outcome], [(2, "DONE")])
        by_generation = conn.execute(
            "SELECT generation, count(*) AS n FROM transcript GROUP BY 1 ORDER BY 1"
        ).fetchall()
        expect(
            "transcript rows per generation (intent by 1; receipt by 2; nothing later by 1)",
            [(r["generation"], r["n"]) for r in by_generation],
            [(1, 1), (2, 1)],
        )
        return facts | {"ledger": ledger}


def pg_shop_file(pg: Any) -> Path:
    return Path(pg.__file__)


# ------------------------------------------------------------------ the worker child


def child_main(args: argparse.Namespace) -> int:
    """Claim, record the intended order, say so; then die (killed) or, once released, try
    every write with the old claim and report what happened (live)."""
    block_reference(allow=[args.impl])
    directory = Path(args.dir)
    try:
        pg = pg_shop.load_pg_impl(args.impl)
        conn = pg_shop.connect(args.dsn)
        held = pg.claim(conn, OWNER, ttl=args.lease)
        operation = f"op-{held.work_id}-{os.getpid()}"
        pg.observe(conn, held, {"intent": operation})
        ready = {"work_id": held.work_id, "generation": held.generation, "operation": operation}
        write_ready(directory / "ready.json", ready)
    except NotStarted as stub:
        record = {"not_started": stub.function, "section": stub.section, "where": stub.where}
        write_ready(directory / "ready.json", record)
        return 3
    if args.child == "killed":
        time.sleep(DEADLINE)  # the parent kills us long before this
        return 1
    wait_for_file(directory / "release.json", timeout=DEADLINE + args.lease * 5)
    client = SupplierClient(args.endpoint, identity=args.identity, timeout=5.0)
    report = {
        "transcript": refusal(lambda: pg.observe(conn, held, {"text": "late"})),
        "completion": refusal(lambda: pg.finish(conn, held, "DONE", {"by": "stale"})),
        "supplier": refusal(lambda: send_fenced(pg, conn, held, client, operation + "-again")),
    }
    write_ready(
        directory / "stale.json",
        {k: v or "ACCEPTED: the write went through" for k, v in report.items()},
    )
    return 0


# ------------------------------------------------------------------ the parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    add_impl_option(parser)
    parser.add_argument("--lease", type=float, default=2.0, help="real lease in seconds")
    for name in ("--child", "--dsn", "--dir", "--endpoint", "--identity"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    if reason := missing():
        print(f"SKIP  exercise 7 needs PostgreSQL: {reason}")
        return 1
    pg_file = impl_path(args.impl).with_name("ch13_postgres.py")
    block_reference(allow=[pg_file])
    pg = pg_shop.load_pg_impl(pg_file)
    print(f"checkpoint 13d on {pg_file} (lease {args.lease:g}s, the server's clock)")
    results = []
    with postgres_server() as server:
        for number, name, mode in CASES:
            with tempfile.TemporaryDirectory(prefix="pg-checkpoint-") as tmp:
                results.append(_run_case(pg, server, Path(tmp), args, (number, name), mode))
    status = overall(results)
    print(said(status))
    return EXIT[status]


def _run_case(
    pg: Any, server: Any, directory: Path, args: Any, listed: tuple[int, str], mode: str
) -> CaseResult:
    number, name = listed
    rerun = f"python checkpoints/ch13_postgres_recovery.py --impl {args.impl}"
    try:
        facts = case(pg, server, directory, args.lease, mode)
    except NotStarted as stub:
        print(f"NOT STARTED  {number} {name}: {stub}")
        return CaseResult.NOT_STARTED
    except Exception as error:  # noqa: BLE001 - a student's code may raise anything
        print(f"FAIL  {number} {name}: {type(error).__name__}: {error}\n      rerun: {rerun}")
        return CaseResult.FAIL
    stale = "/".join(sorted(facts.get("stale", {}))) or "none"
    print(
        f"PASS  {number} {name}: generation {facts['generations'][0]}->{facts['generations'][1]},"
        f" waited {facts['waited_seconds']:.2f}s, ledger {len(facts['ledger'])} order,"
        f" stale writes refused: {stale}"
    )
    return CaseResult.PASS


if __name__ == "__main__":
    sys.exit(main())
