"""Exercise 7 checkpoint: kill and out-live real workers on PostgreSQL, and recover their work.

    python checkpoints/ch13_postgres_recovery.py [--impl learner|solutions|PATH]
                                                 [--evidence FILE] [--lease SECONDS] [--case N]
                                                 [--keep DIR]

Runs your ``ch13_postgres.py`` (beside the chapter file ``--impl`` names) as the chapter's
checkpoint runs your chapter file: only in sandboxes, one for each case, never in this process.
Read it top to bottom: each case is one function, named after one of the cases listed in
``lucyshop.lab.checkpoint.cases`` (``ON_POSTGRES``, with the numbers ``--case`` takes there),
and its docstring says what it proves. One PostgreSQL server (``$LUCYSHOP_PG_DSN``, else an
embedded one, stopped at the end); each case gets a schema and a role of its own and a supplier
process whose ledger (its own SQLite file) is read independently. The world a case runs in is
``lucyshop.lab.checkpoint.postgres.PgShop``; the command line, the sandboxes, the evidence and
the judge's result are ``lucyshop.lab.checkpoint.runner``'s.

The supplier send is fenced the way exercise 7 fences a write: ``assert_current`` inside the
transaction that records the receipt, which keeps the lease row locked until it commits.
Exit status: 0 every case passed, 1 a case failed, 3 a function is still a stub.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import KILLED, LIVE_STALE
from lucyshop.lab.checkpoint.expectations import WRITES, expect_refused
from lucyshop.lab.checkpoint.postgres import POSTGRES, PgCase, PgShop
from lucyshop.lab.checkpoint.runner import Run, main


def killed_holder(run: Run, given: PgCase, directory: Path) -> dict[str, Any]:
    """A worker SIGKILLed after it recorded the order it meant to send loses nothing and
    repeats nothing: the replacement waits until the *server* says the lease ran out, sends
    that order under its own generation and finishes; the supplier holds one order."""
    with PgShop(run, given, directory, KILLED) as shop:
        ready, status = shop.kill_holder()
        facts = shop.recover()
        return facts | shop.settled() | {"child_pid": ready["pid"], "exit_status": status}


def live_stale_holder(run: Run, given: PgCase, directory: Path) -> dict[str, Any]:
    """A holder that was only slow cannot write after the takeover: alive all along, it tries
    its transcript row, its completion and the supplier send once the replacement has
    finished, and each is refused; the supplier still holds one order."""
    with PgShop(run, given, directory, LIVE_STALE) as shop:
        child, ready = shop.start_holder()
        shop.competing_claim_gets_nothing()
        facts = shop.recover()
        stale = shop.release(child)
        expect_refused(stale, WRITES, "the replacement took the work")
        return facts | shop.settled() | {"child_pid": ready["pid"], "stale_child_reported": stale}


if __name__ == "__main__":
    sys.exit(main(globals(), POSTGRES))
