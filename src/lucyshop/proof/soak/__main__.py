"""``python -m lucyshop.proof.soak``: the command line of the soak (and of its worker processes)."""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from lucyshop.lab.given.stubs import NotStarted, placeholders, stub_nodes
from lucyshop.lab.loader import (
    ImplementationError,
    ReferenceBlocked,
    add_impl_option,
    block_for,
    impl_path,
    load_impl,
)
from lucyshop.lab.services.processes import end_children_on_sigterm
from lucyshop.lab.statuses import Mark, result_line
from lucyshop.proof import soak
from lucyshop.proof.soak.chaos import CHAOS_EVERY, PAUSE_SHARE, Config, Soak
from lucyshop.proof.soak.invariants import findings
from lucyshop.proof.soak.report import facts, print_report, rerun_command, write_report
from lucyshop.proof.soak.script import BOUNDARIES
from lucyshop.proof.soak.shop import SUPPLIER
from lucyshop.proof.soak.worker import worker_main

ENDED = "every process this soak started has been ended"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.proof.soak", description=soak.__doc__.split("\n", 1)[0]
    )
    parser.add_argument(
        "--seconds", type=float, default=120.0, help="seconds of chaos (default 120)"
    )
    parser.add_argument("--seed", type=int, default=13)
    add_impl_option(parser)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--items", type=int, default=400, help="assignments in the queue (default 400)"
    )
    parser.add_argument(
        "--lease", type=float, default=1.5, help="the workers' real lease in seconds (default 1.5)"
    )
    parser.add_argument(
        "--chaos-every",
        type=float,
        default=CHAOS_EVERY,
        help=f"mean seconds between chaos events (default {CHAOS_EVERY:g})",
    )
    parser.add_argument(
        "--pause-share",
        type=float,
        default=PAUSE_SHARE,
        help=f"share of chaos events that are pauses (default {PAUSE_SHARE:g})",
    )
    parser.add_argument(
        "--stale",
        action="append",
        choices=BOUNDARIES,
        default=[],
        help="also make one stale write at this boundary for certain: the first turn to reach "
        "it stops there until another worker has taken its work over (repeatable)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the run's directory even when it passes"
    )
    parser.add_argument(
        "--report", type=Path, help="also write the figures and findings as JSON here"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for name in (
        "--shop",
        "--owner",
        "--endpoint",
        "--identity",
        "--log",
        "--stop",
        "--worker-seed",
        "--breaks",
    ):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--busy-timeout-ms", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    limits = (
        (math.isfinite(args.seconds) and 1 <= args.seconds <= 3600, "--seconds is from 1 to 3600"),
        (1 <= args.workers <= 16, "--workers is from 1 to 16"),
        (1 <= args.items <= 5000, "--items is from 1 to 5000"),
        (
            math.isfinite(args.lease) and 0.6 <= args.lease <= 10,
            "--lease is from 0.6 to 10 seconds",
        ),
        (
            math.isfinite(args.chaos_every) and 0.1 <= args.chaos_every <= 60,
            "--chaos-every is from 0.1 to 60",
        ),
        (0 <= args.pause_share <= 1, "--pause-share is from 0 to 1"),
        (not args.stale or args.workers >= 2, "--stale needs 2 workers or more (one takes over)"),
    )
    for ok, message in limits:
        if not ok:
            parser.error(message)
    return args


# the chapter's functions the soak calls, in the order a learner meets them
CALLED = ("open_worker_shop", "enqueue", "claim", "observe", "finish", "recover_once", "reconcile")


def refuse_stubs(leases: Any) -> None:
    """Raise the ``NotStarted`` of the first function the soak calls that is still a stub (read
    from the file's syntax tree, raised by the stub itself), before any worker starts."""
    stubs = stub_nodes(leases.__file__)
    for name in CALLED:
        if name in stubs:
            args, kwargs = placeholders(stubs[name])
            try:
                getattr(leases, name)(*args, **kwargs)
            except NotStarted:
                raise
            except Exception:  # noqa: BLE001, S112 - defined again below its stub: not a stub
                continue


def run(config: Config, leases: Any, directory: Path, report: Path | None) -> int:
    """One soak in ``directory``: 0 every invariant held, 1 one failed, 3 still a stub."""
    started = time.monotonic()
    try:
        refuse_stubs(leases)
        leases.open_worker_shop(directory / "shop.db")[0].close()
    except NotStarted as stub:
        print(result_line(Mark.NOT_STARTED, str(stub)))
        return 3
    chaos = Soak(config, leases, directory)
    evidence = chaos.run()
    found, figures = findings(evidence), facts(chaos, evidence)
    print_report(config, figures, found, time.monotonic() - started)
    if report:
        write_report(report, config, figures, found)
    return 0 if all(v.ok for v in found) else 1


def run_to_the_end(config: Config, leases: Any, directory: Path, report: Path | None) -> int:
    """``run``, saying how it ended when it did not end by itself (every child is ended)."""
    try:
        return run(config, leases, directory, report)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {ENDED}\nrerun: {rerun_command(config)}")
        return 130
    except SystemExit as stopped:  # SIGTERM raised it; the with-blocks ended every child
        print(f"\nterminated: {ENDED}\nrerun: {rerun_command(config)}")
        return int(stopped.code or 1)
    except NotStarted as stub:
        print(result_line(Mark.NOT_STARTED, str(stub)))
        return 3
    except Exception as error:  # noqa: BLE001 - the harness failed: say where, keep the evidence
        where = traceback.extract_tb(error.__traceback__)[-1]
        why = f"{type(error).__name__}: {error}\n      at {where.filename}:{where.lineno}"
        print(result_line(Mark.FAIL, "the soak could not finish", why))
        print(f"rerun: {rerun_command(config)}")
        return 1


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        return worker_main(args)
    try:
        impl = impl_path(args.impl)
    except ImplementationError as unknown:
        print(f"soak: {unknown}", file=sys.stderr)
        return 2
    block_for(impl)
    config = Config(
        args.seconds,
        args.seed,
        impl,
        args.impl,
        args.workers,
        args.items,
        args.lease,
        args.chaos_every,
        args.pause_share,
        tuple(dict.fromkeys(args.stale)),
    )
    try:
        leases = load_impl(impl)
    except ReferenceBlocked as blocked:
        print(result_line(Mark.FAIL, "reference blocked", str(blocked)))
        return 1
    end_children_on_sigterm()  # a kill from outside still ends every child
    directory = Path(tempfile.mkdtemp(prefix=f"ch13-soak-{args.seed}-"))
    print(
        f"soak of {impl} with seed {args.seed} for {args.seconds:g}s (run directory {directory})",
        flush=True,
    )
    status = 1
    try:
        status = run_to_the_end(config, leases, directory, args.report)
    finally:
        if args.keep or status not in (0, 3):
            print(f"kept for inspection: {directory} (shop.db, {SUPPLIER}-ledger.sqlite, logs/)")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
