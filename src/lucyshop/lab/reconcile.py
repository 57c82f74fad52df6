"""``python -m lucyshop.lab.reconcile``: settle uncertain orders with a chosen implementation.

    python -m lucyshop.lab.reconcile SHOP_DB --supplier URL --identity NAME
        [--impl learner|solutions|PATH] [--timeout S] [--json]

It runs the chosen implementation's ``reconcile(db, supplier)`` (the kit's own function: the
chapter describes reconciliation but prints no code for it): it looks up the SENDING and
UNKNOWN orders of finished work by their operation ids, settles what the supplier has, and
never sends. It lives in the lab because choosing an implementation is the lab's job; the
runtime's ``python -m lucyshop status`` prints this command for each order it settles. Exit
status: 0 done, 2 bad input or no such shop, 3 the implementation's ``reconcile`` is a stub.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lucyshop import status
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ImplementationError, add_impl_option, impl_path, load_impl
from lucyshop.store import connect
from lucyshop.supplier import SupplierClient


def reconcile(args: argparse.Namespace) -> int:
    """Open the shop read-write (never creating it), load the implementation, reconcile,
    print rows."""
    try:
        path = impl_path(args.impl)
        client = SupplierClient(args.supplier, identity=args.identity, timeout=args.timeout)
        if not Path(args.shop).is_file():
            raise ValueError(f"there is no shop file at {args.shop}")
        leases = load_impl(path)
    except (ImplementationError, ValueError) as error:
        print(f"reconcile: {error}", file=sys.stderr)
        return 2
    db = connect(args.shop)
    try:
        status.schema(db)
        rows = leases.reconcile(db, client)
    except status.ShopUnreadable as error:
        print(f"reconcile: {error}", file=sys.stderr)
        return 2
    except NotStarted as stub:
        print(
            f"reconcile: {stub}\n  (to settle these orders with the reference: --impl solutions)",
            file=sys.stderr,
        )
        return 3
    finally:
        db.close()
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    print(
        f"reconcile {args.shop} with {client.identity} at {client.endpoint} ({path.name} from "
        f"{path.parent.name}/)"
    )
    if not rows:
        print(
            "  nothing to reconcile: no SENDING or UNKNOWN order of finished work for "
            f"{client.identity}"
        )
    for row in rows:
        print(
            f"  order {row['order_id']:<4} {row['operation']}  {row['before']} -> {row['after']}  "
            f"{row['note']}"
        )
    settled = sum(row["after"] != row["before"] for row in rows)
    print(f"{len(rows)} looked up, {settled} settled, {len(rows) - settled} still uncertain")
    return 0


def main(argv: list[str] | None = None) -> int:
    settle = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.reconcile",
        description="Look up SENDING and UNKNOWN orders of finished work; never send.",
    )
    settle.add_argument("shop", metavar="SHOP_DB", help="the shop's SQLite file")
    settle.add_argument(
        "--supplier", metavar="URL", required=True, help="the supplier's http://host:port"
    )
    settle.add_argument("--identity", metavar="NAME", required=True, help="the supplier's identity")
    add_impl_option(settle)
    settle.add_argument("--timeout", type=float, default=2.0, help="seconds per lookup (default 2)")
    settle.add_argument("--json", action="store_true", help="print the rows as JSON")
    return reconcile(settle.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
