"""The command line: ``python -m lucyshop status SHOP_DB ...`` (also ``python -m lucyshop.status``).

Parses the options, collects the figures (``signals``) and prints them as the screen
(``render``) or, with ``--json``, as JSON; exit status 0, or 2 with a ``status: ...`` line
for a file it cannot read as a shop. ``lucyshop.__main__`` mounts the same options as its
``status`` command.
"""

from __future__ import annotations

import argparse
import json
import sys

from lucyshop import status
from lucyshop.status.render import render
from lucyshop.status.signals import HEALTH_TIMEOUT, ShopUnreadable, collect


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
        prog="python -m lucyshop status", description=status.__doc__.split("\n", 1)[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
