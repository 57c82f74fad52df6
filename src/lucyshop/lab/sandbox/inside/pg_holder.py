"""Exercise 7's checkpoint worker child: it runs the student's ``ch13_postgres.py`` inside a
sandbox, on a connection of its own through the relay to the PostgreSQL server.

    python -m lucyshop.lab.sandbox.inside.pg_holder MODE --pg FILE --dir DIR
        --endpoint URL --identity NAME --lease S --timeout S [--relay SOCKET]

Its connection string is ``$LUCYSHOP_HOLDER_DSN`` (an environment only its own uid may read;
a command line any process may), for a role that may use the case's schema alone.

It claims the case's work, records in the transcript the order it means to send, says so in
``DIR/ready.json``, and then does what ``MODE`` says (``holder_modes.Mode``: ``killed`` or
``live``). The checkpoint (``checkpoints/ch13_postgres_recovery.py``) kills or releases it,
and trusts only what it reads back itself: the tables on its own connection, the supplier's
ledger, and what this child writes back of its own stale writes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lucyshop.lab.given import pg_shop
from lucyshop.lab.given.exercise_kit import attempt
from lucyshop.lab.given.orders import OWNER, VANILLA
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ReferenceBlocked
from lucyshop.lab.sandbox.inside.holder import arguments, cannot_go_on, supplier_client
from lucyshop.lab.sandbox.relay import listen_inside
from lucyshop.lab.services.holder_modes import Mode
from lucyshop.lab.services.limits import WAIT_SECONDS
from lucyshop.lab.services.processes import wait_for_file, write_ready

DSN_ENV = "LUCYSHOP_HOLDER_DSN"


def send_fenced(pg: Any, conn: Any, held: Any, client: Any, operation: str) -> None:
    """Send the order only as the current holder, and record its receipt in the same
    transaction: the lease row stays locked from the holder check to the commit."""
    with conn.transaction():
        pg.assert_current(conn, held)
        receipt = client.order(operation, VANILLA)
        pg.observe(conn, held, {"receipt": receipt})


def child_main(args: argparse.Namespace) -> int:
    """Claim, record the intended order, say so; then wait to be killed, or, once released,
    try every write with the old claim and write back what happened."""
    directory = Path(args.dir)
    awaited = directory / "ready.json"  # the record the checkpoint waits for now
    if args.relay:  # in a sandbox without a network: the supplier through the parent's relay
        listen_inside(urlsplit(args.endpoint).port, args.relay)
    try:
        pg = pg_shop.load_pg_impl(args.pg)
        conn = pg_shop.connect(os.environ[DSN_ENV])
        held = pg.claim(conn, OWNER, ttl=args.lease)
        operation = f"op-{held.work_id}-{os.getpid()}"
        pg.observe(conn, held, {"intent": operation})
        write_ready(
            directory / "ready.json",
            {"pid": os.getpid(), "generation": held.generation, "operation": operation},
        )
        awaited = directory / "stale.json"
        if args.child == Mode.KILLED:
            time.sleep(WAIT_SECONDS)  # the parent kills us long before this
            return 1
        wait_for_file(directory / "release.json", timeout=WAIT_SECONDS + args.lease * 5)
        client = supplier_client(args)
        outcomes = {
            "transcript": attempt(lambda: pg.observe(conn, held, {"text": "late"})),
            "completion": attempt(
                lambda: pg.finish(conn, held, "DONE", "late, by the stale holder")
            ),
            "supplier": attempt(lambda: send_fenced(pg, conn, held, client, operation + "-again")),
        }
    except (NotStarted, ReferenceBlocked) as error:
        return cannot_go_on(awaited, error)
    write_ready(
        directory / "stale.json",
        {k: v or "ACCEPTED: the write went through" for k, v in outcomes.items()},
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return child_main(arguments(__doc__, [Mode.KILLED, Mode.LIVE], ("--pg",), argv))


if __name__ == "__main__":
    sys.exit(main())
