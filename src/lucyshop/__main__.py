"""``python -m lucyshop``: an operator's commands on one shop file.

    python -m lucyshop status SHOP_DB [--supplier URL] [--identity NAME] [--workers FILE] [--json]

``status`` reads the records and prints the four signals (``lucyshop.status``); exit status 0,
or 2 with a ``status: ...`` message for a file it cannot read as a shop. Settling uncertain
orders runs a chapter implementation, so that command is the lab's:
``python -m lucyshop.lab.reconcile`` (the report prints it, filled in, for each such order).
"""

from __future__ import annotations

import argparse
import sys

from lucyshop import status
from lucyshop.status.__main__ import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop", description=__doc__.split("\n", 1)[0]
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_arguments(
        commands.add_parser(
            "status",
            help="the four-signal report of a shop",
            description=status.__doc__.split("\n", 1)[0],
        )
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
