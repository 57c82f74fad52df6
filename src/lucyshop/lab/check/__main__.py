"""``make check``: ``python -m lucyshop.lab.check``, the command line over ``check.run``.

    python -m lucyshop.lab.check [--impl learner|solutions|PATH] [--no-checkpoint]
                                  [--no-measured] [--json FILE] [--test-timeout S] ...

Every row NOT STARTED, FAILING or PASSING (LEFT OUT: exercises 5 and 6 under
``--no-measured``, exercise 7 without PostgreSQL), then the checkpoint; ``engine.run`` says
how. Exit status: 0 passing, 1 failing, 2 could not be checked, 3 not started yet (``make
check`` treats 3 as success); a row beyond the book never changes it. ``--json FILE``
writes the result as ``ch13-check/2`` (``results``), which ``make grade`` reads from its
child.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.check.engine import run
from lucyshop.lab.check.guard import Limits
from lucyshop.lab.check.results import write_json
from lucyshop.lab.loader import add_impl_option

SECONDS = {  # each --NAME-timeout option: what it bounds
    "test": "one test",
    "case": "one checkpoint case",
    "load": "importing the file",
    "suite": "the whole suite",
    "checkpoint": "the whole checkpoint",
}


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.check",
        description="Check a chapter-13 file: each function's status, then the checkpoint.",
    )
    add_impl_option(found)
    found.add_argument("--no-checkpoint", action="store_true", help="show the table only")
    found.add_argument(
        "--no-measured",
        action="store_true",
        help="leave out exercises 5 and 6 (a minute of real model turns)",
    )
    found.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    for name, what in SECONDS.items():
        found.add_argument(
            f"--{name}-timeout",
            type=float,
            default=getattr(Limits, name),
            metavar="S",
            help=f"seconds for {what} (default %(default)g)",
        )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    try:
        limits = Limits(**{name: getattr(args, f"{name}_timeout") for name in SECONDS})
    except ValueError as error:
        options.error(str(error))
    result = run(
        args.impl, checkpoint=not args.no_checkpoint, measured=not args.no_measured, limits=limits
    )
    if args.json:
        write_json(result, args.json)
    return result.exit


if __name__ == "__main__":
    sys.exit(main())
