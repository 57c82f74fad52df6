"""The SQLite checkpoint's worker child: it runs the student's functions inside a sandbox.

    python -m lucyshop.lab.sandbox.inside.holder MODE --shop FILE --endpoint URL --identity NAME
        --lease S --timeout S --dir DIR [--relay SOCKET]

It claims the case's work, proposes six tubs, records the operator's approval, says so in
``DIR/ready.json``, and then does what ``MODE`` says (``child_main``). The checkpoint
(``checkpoints/ch13_worker_recovery.py``) kills, pauses or releases it, and trusts only what
it reads back itself: the shop file, the supplier's ledger, and the refusals this child
writes back of its own stale writes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lucyshop import approval
from lucyshop.lab.given.exercise_kit import attempt
from lucyshop.lab.given.orders import OPERATOR, OWNER, POLICY, VANILLA
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ReferenceBlocked, _ImportBlocker, load_impl
from lucyshop.lab.sandbox.relay import listen_inside
from lucyshop.lab.services.holder_modes import Mode
from lucyshop.lab.services.limits import WAIT_SECONDS
from lucyshop.lab.services.processes import wait_for_file, write_ready

CHOCOLATE = {"sku": "chocolate-tub", "quantity": 4, "unit_cents": 450}


def child_main(args: argparse.Namespace) -> int:
    """A worker: claim, propose six tubs, record the operator's approval, say so in
    ``ready.json``, then do what its ``Mode`` says; a holder released by the parent tries the
    transcript, the completion and the supplier send with its old claim and records each in
    ``stale.json``."""
    directory = Path(args.dir)
    awaited = directory / "ready.json"  # the record the checkpoint waits for now
    if args.relay:  # in a sandbox without a network: the supplier through the parent's relay
        listen_inside(urlsplit(args.endpoint).port, args.relay)
    try:
        leases = load_impl()
        db, _ = leases.open_worker_shop(args.shop)
        held = leases.claim(db, OWNER, ttl=args.lease)
        client = supplier_client(args)
        order = approval.propose(db, held, supplier=client.identity, proposal=VANILLA)
        approval.approve(db, order["id"], actor=OPERATOR, digest=order["digest"], policy=POLICY)
        pending = order
        if args.child == Mode.CANCEL:
            approval.execute(db, held, order["id"], client, policy=POLICY)
            pending = approval.propose(db, held, supplier=client.identity, proposal=CHOCOLATE)
            approval.approve(
                db, pending["id"], actor=OPERATOR, digest=pending["digest"], policy=POLICY
            )
        write_ready(
            directory / "ready.json",
            {
                "pid": os.getpid(),  # in the sandbox's PID namespace (the parent finds the host's)
                "work_id": held.work_id,
                "generation": held.generation,
                "worker_id": held.worker_id,
                "expires": held.expires,
                "order_id": order["id"],
                "operation": order["operation"],
                "second_order_id": pending["id"],
            },
        )
        awaited = directory / "stale.json"
        if args.child == Mode.SENDING:
            approval.execute(db, held, order["id"], client, policy=POLICY)
        if args.child in (Mode.KILLED, Mode.SENDING):
            time.sleep(WAIT_SECONDS)  # the parent kills us long before this
            return 1
        wait_for_file(directory / "release.json", timeout=WAIT_SECONDS + args.lease * 2)
        outcomes = {
            "transcript": attempt(
                lambda: leases.observe(db, held, {"role": "assistant", "content": "late"})
            ),
            "completion": attempt(
                lambda: leases.finish(db, held, "DONE", f"finished by {held.worker_id}")
            ),
            "supplier": attempt(
                lambda: approval.execute(db, held, pending["id"], client, policy=POLICY)
            ),
        }
        write_ready(
            directory / "stale.json",
            {k: v or "ACCEPTED: the write went through" for k, v in outcomes.items()},
        )
        return 0
    except (NotStarted, ReferenceBlocked) as error:
        return cannot_go_on(awaited, error)


def cannot_go_on(awaited: Path, error: NotStarted | ReferenceBlocked) -> int:
    """Why a holder stopped, in the record the checkpoint waits for at that moment
    (``ready.json`` before it held the work, ``stale.json`` after: a fence that is still a stub
    stops a released holder), and the holder's exit status: 3 a function is still a stub
    (which one, and where to read), 4 the file reached for the reference solutions."""
    if isinstance(error, NotStarted):
        write_ready(
            awaited,
            {"not_started": error.function, "section": error.section, "where": error.where},
        )
        return 3
    write_ready(awaited, {"reference_blocked": str(error)})
    return 4


def supplier_client(args: argparse.Namespace) -> Any:
    from lucyshop.supplier import SupplierClient

    return SupplierClient(args.endpoint, identity=args.identity, timeout=args.timeout)


def arguments(
    doc: str, modes: list[Mode], more: tuple[str, ...], argv: list[str] | None
) -> argparse.Namespace:
    """A holder's command line (``lucyshop.lab.checkpoint.shop.Holding`` writes it): its mode, the
    case's directory, supplier and lease, and the ``more`` its store needs. Parsed, the
    reference is closed to imports with the loader's one-line message."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("child", type=Mode, choices=modes)
    for name in ("--endpoint", "--identity", "--dir", *more):
        parser.add_argument(name, required=True)
    parser.add_argument("--relay", help="a Unix socket that reaches the supplier")
    parser.add_argument("--lease", type=float, required=True)
    parser.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args(argv)
    sys.meta_path.insert(0, _ImportBlocker())  # the one-line message for `import solutions`
    return args


def main(argv: list[str] | None = None) -> int:
    return child_main(arguments(__doc__, list(Mode), ("--shop",), argv))


if __name__ == "__main__":
    sys.exit(main())
