"""Exercise 7's checkpoint on PostgreSQL: what its cases are handed (``PgCase``), one case's
world (``PgShop``), and the checkpoint itself for the runner (``POSTGRES``).

The case functions in ``checkpoints/ch13_postgres_recovery.py`` drive it. One server for the
run (``$LUCYSHOP_PG_DSN``, else an embedded one, stopped at the end); each case gets a schema,
a role that may use that schema alone, a supplier process and a sandbox of its own. The
student's ``ch13_postgres.py`` runs only in that sandbox: its worker (``PgCase.pg``) and the
holder child (``lucyshop.lab.sandbox.inside.pg_holder``), both reaching the server through a
relay as that role. Every read here is the trusted side's own, on its own connection; what the
tables hold at the end is kept beside the case for the judge, out of the sandbox's reach.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucyshop import atomic
from lucyshop.lab.checkpoint.cases import ON_POSTGRES, CaseId
from lucyshop.lab.checkpoint.expectations import expect
from lucyshop.lab.checkpoint.judge import POSTGRES_RULES, TABLES, kept_directory
from lucyshop.lab.checkpoint.runner import CheckpointPlan
from lucyshop.lab.checkpoint.shop import ASSIGNMENT, Holding
from lucyshop.lab.evidence import receipts
from lucyshop.lab.given import pg_shop
from lucyshop.lab.given.orders import OWNER, VANILLA
from lucyshop.lab.loader import PG_FILE
from lucyshop.lab.sandbox import CallTimedOut, Remote, WorkerDied
from lucyshop.lab.sandbox.inside.pg_holder import DSN_ENV
from lucyshop.lab.sandbox.postgres.box import (
    INSIDE,
    PgSandbox,
    paired,
    pg_sandbox,
    transaction,
)
from lucyshop.lab.services import postgres
from lucyshop.lab.services.limits import WAIT_SECONDS
from lucyshop.lab.services.processes import wait_until
from lucyshop.supplier import ledger_orders

if TYPE_CHECKING:
    from lucyshop.lab.checkpoint.runner import Run

HOLDER = "lucyshop.lab.sandbox.inside.pg_holder"  # the worker child, run in the case's jail
KEPT_TABLES = ("work", "leases", "transcript", "outcomes")


@dataclass(frozen=True)
class PgCase:
    """What a case is handed: the student's ``ch13_postgres.py`` loaded in the case's sandbox,
    that sandbox, and the run's server."""

    pg: Remote
    box: PgSandbox
    server: postgres.Server


class OnPostgres(CheckpointPlan):
    """Exercise 7's checkpoint: a PostgreSQL server for the run, a ``PgCase`` for each case."""

    def missing(self) -> str | None:
        reason = postgres.missing()
        return None if reason is None else f"PostgreSQL: {reason}"

    @contextmanager
    def services(self) -> Iterator[postgres.Server]:
        with postgres.postgres_server() as server:
            yield server

    @contextmanager
    def sandbox(
        self, shared: postgres.Server, impl: Path, directory: Path, workdir: Path, seconds: float
    ) -> Iterator[PgCase]:
        shown = receipts.shown(self.student_path(impl))
        with pg_sandbox(impl, shared, workdir=workdir, scratch=[directory], shown=shown) as box:
            box.box.share(directory)
            yield PgCase(box.load(seconds=seconds), box, shared)


POSTGRES = OnPostgres("checkpoint 13d", ON_POSTGRES, POSTGRES_RULES, PG_FILE)


class PgShop(Holding):
    """One case's world on PostgreSQL: a schema with the shop's tables and one work item, a
    role for the sandbox, our connection paired with the worker's, a supplier, the holder."""

    def __init__(self, run: Run, given: PgCase, directory: Path, case: CaseId) -> None:
        super().__init__(run, given.box.box, directory, case)
        self.pg, self.pg_box, self.server = given.pg, given.box, given.server

    def __enter__(self) -> PgShop:
        """Start the supplier, make the schema and the role, enqueue the assignment. On the
        way out (or if this fails part way) the holder is ended first, then the worker's
        connection; the tables are kept, and the role, the schema and the supplier go."""
        with ExitStack() as stack:
            self.open_supplier(stack)
            dsn = stack.enter_context(postgres.scratch_schema(self.server, "checkpoint"))
            pg_shop.create_shop(dsn)
            self.role = stack.enter_context(postgres.student_role(self.server, dsn))
            remote = self.pg_box.connect(self.role)
            self.conn = stack.enter_context(paired(dsn, remote))
            stack.push(self._keep)
            stack.callback(self._close, remote)
            self.open_children(stack)
            self.work_id = pg_shop.add_work(self.conn, f"{self.case.tag}-1", ASSIGNMENT)
            self.event("enqueued", work_id=self.work_id, supplier_pid=self.supplier.pid)
            self._open = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._open.__exit__(*exc)  # type: ignore[arg-type]

    def _close(self, remote: Remote) -> None:
        with suppress(CallTimedOut, WorkerDied):
            self.pg_box.probes().close(remote)

    def _keep(self, failed: type[BaseException] | None, *_exc: object) -> None:
        """The tables as they are at the end of a case that raised nothing, read on our
        connection, kept for the judge (only a case that passed is held to them)."""
        if failed is not None:
            return
        tables = {
            name: self.conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()
            for name in KEPT_TABLES
        }
        kept = kept_directory(self.directory) / TABLES
        atomic.write_text(kept, json.dumps(tables, default=str))

    def lease(self) -> dict[str, Any]:
        """Which work the lease row is on, at which generation (read on our connection)."""
        row = self.conn.execute("SELECT work_id, generation FROM leases").fetchone()
        return {"work_id": row["work_id"], "generation": row["generation"]}

    def intended(self) -> list[str]:
        """The operations generation 1 recorded that it meant to send, oldest first."""
        rows = self.conn.execute(
            "SELECT message->>'intent' AS operation FROM transcript"
            " WHERE work_id = %s AND generation = 1 AND message ? 'intent' ORDER BY seq",
            (self.work_id,),
        ).fetchall()
        return [row["operation"] for row in rows]

    def start_holder(self) -> tuple[Any, dict[str, Any]]:
        """Start the case's worker child; return it once it holds the work and has recorded
        the order it means to send."""
        jail = self.box.jail
        argv = ["--pg", str(jail.inside(jail.staged / PG_FILE))]
        env = {DSN_ENV: self.pg_box.dsn(self.role)}
        child, ready = self.spawn_holder(HOLDER, argv, env, [(self.pg_box.relay.directory, INSIDE)])
        self.event(
            "holder ready",
            pid=ready["pid"],
            generation=ready["generation"],
            operation=ready["operation"],
        )
        expect("holder's claim", self.lease(), {"work_id": self.work_id, "generation": 1})
        return child, ready

    def competing_claim_gets_nothing(self) -> None:
        rival = self.pg.claim(self.conn, "rival", ttl=self.run.lease)
        self.event("competing claim", got=None if rival is None else rival.worker_id)
        expect("a competing claim while the holder's lease is alive", rival, None)

    def recover(self) -> dict[str, Any]:
        """Wait until the server lets a claim through, then go on from the records alone:
        send, fenced, each order generation 1 meant to send that the supplier never saw, and
        finish."""
        started = time.monotonic()
        held = wait_until(
            lambda: self.pg.claim(self.conn, OWNER, ttl=self.run.lease * 5),
            timeout=self.run.lease + WAIT_SECONDS,
            interval=0.05,
            what="the server to let a replacement claim the work",
        )
        waited = round(time.monotonic() - started, 3)
        self.event("lease expired", waited_seconds=waited)
        expect("replacement", self.lease(), {"work_id": self.work_id, "generation": 2})
        sent = []
        for operation in self.intended():
            if self.client.lookup(operation) is None:  # the supplier never saw it: send it now
                with transaction(self.pg_box.probes(), self.conn):
                    self.pg.assert_current(self.conn, held)
                    receipt = self.client.order(operation, VANILLA)
                    self.pg.observe(self.conn, held, {"receipt": receipt})
                sent.append(operation)
        self.pg.finish(self.conn, held, "DONE", f"sent {', '.join(sent) or 'nothing'}")
        self.event("replacement finished", generation=2, sent=sent)
        expect("the replacement sent the order generation 1 meant to", sent, self.intended())
        return {"waited_seconds": waited}

    def settled(self) -> dict[str, Any]:
        """Read the tables and the supplier's ledger back: one order, sent by generation 2,
        which finished; generation 1 wrote its intent and nothing after."""
        intended = self.intended()
        expect("orders generation 1 meant to send", len(intended), 1)
        ledger = [row["operation"] for row in ledger_orders(self.supplier.database)]
        expect("supplier ledger (its own file)", ledger, intended)
        outcome = self.conn.execute("SELECT generation, status FROM outcomes").fetchall()
        expect("outcome", [(o["generation"], o["status"]) for o in outcome], [(2, "DONE")])
        by_generation = self.conn.execute(
            "SELECT generation, count(*) AS n FROM transcript GROUP BY 1 ORDER BY 1"
        ).fetchall()
        expect(
            "transcript rows per generation (an intent by 1, a receipt by 2, nothing later by 1)",
            [(r["generation"], r["n"]) for r in by_generation],
            [(1, 1), (2, 1)],
        )
        return {
            "generations": [1, 2],
            "outcome": "DONE",
            "ledger_count": len(ledger),
            "ledger_operations": ledger,
        }
