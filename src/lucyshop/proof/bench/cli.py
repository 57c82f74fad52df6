"""Run the bench sections, print the table with each target held or missed, write the JSON."""

from __future__ import annotations

import argparse
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.launch import SCRIPT
from lucyshop.lab.evidence import receipts
from lucyshop.lab.grade.classroom import Interrupted
from lucyshop.lab.loader import ROOT, add_impl_option, impl_path
from lucyshop.proof.bench.sections import checkpoint, detection, feedback, fence, grading, queues

SECTIONS = (queues, fence, checkpoint, detection, feedback, grading)
PEER_PACKAGES = ("litequeue", "persist-queue")
STOPPED = 130  # ended by Ctrl-C or SIGTERM: nothing written


def _terminate(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # as Ctrl-C: a class being graded has its checks ended first


def numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lucyshop.proof.bench", description=__doc__)
    p.add_argument("--out", type=Path)
    add_impl_option(p)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=1.0, help="per queue cell (default 1.0)")
    p.add_argument("--sizes", type=numbers, default=queues.SIZES, help="e.g. 300,9900")
    p.add_argument("--processes", type=numbers, default=queues.PROCESSES, help="e.g. 1,8")
    p.add_argument("--rounds", type=int, default=500, help="observe calls per fence repeat")
    p.add_argument(
        "--only",
        type=lambda s: s.split(","),
        default=[m.NAME for m in SECTIONS],
        help=f"sections to run, of {','.join(m.NAME for m in SECTIONS)}",
    )
    return p


def measured_code(impl: Path) -> list[Path]:
    """The files whose speed the figures are: the implementation, the store under it, the
    checkpoint (its cases and the room they run on), the bench itself and how it reads the
    machine. A change to any of them makes the report stale."""
    bench = [*sorted(Path(__file__).parent.rglob("*.py")), Path(__file__).parents[1] / "machine.py"]
    room = sorted((ROOT / "src" / "lucyshop" / "lab" / "checkpoint").glob("*.py"))
    return [impl, ROOT / "src" / "lucyshop" / "store.py", ROOT / SCRIPT, *room, *bench]


def started(options: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """The report's head: the receipt engine's provenance, then what only the bench knows."""
    packages = {}
    for name in PEER_PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    impl = options.impl_path
    return {
        "schema": 3,
        "provenance": receipts.provenance(
            command=["-m", "lucyshop.proof.bench", *argv], code=measured_code(impl)
        ),
        "peers": packages,
        "impl": str(impl.relative_to(ROOT)) if impl.is_relative_to(ROOT) else str(impl),
        "options": {k: v for k, v in vars(options).items() if k not in ("out", "impl_path")},
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    options = parser().parse_args(argv)
    unknown = set(options.only) - {m.NAME for m in SECTIONS}
    if unknown:
        parser().error(f"unknown sections: {', '.join(sorted(unknown))}")
    options.impl_path = impl_path(options.impl)
    report = started(options, argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        table, held = measured(options, report)
    except (KeyboardInterrupt, Interrupted) as stopped:
        print(f"bench stopped, nothing written: {stopped or 'interrupted'}", file=sys.stderr)
        return STOPPED
    finally:
        signal.signal(signal.SIGTERM, previous)
    report["targets"] = [t.as_dict() for t in held]
    report["provenance"] = receipts.finish(report["provenance"])
    print("\n".join(table))
    if held:
        print("targets:")
        print("\n".join(t.line() for t in held))
    ran = report["provenance"]
    print(f"took {ran['seconds']:.0f} s; load average {ran['loadavg_end'][0]:.2f}")
    if options.out:
        # make test-time's section is its own run's (``lucyshop.proof.testtime``): a bench keeps it
        if options.out.exists() and "make_test" in (kept := receipts.read_receipt(options.out)):
            report["make_test"] = kept["make_test"]
        receipts.write_receipt(options.out, report)
        print(f"written: {options.out}")
    return 0


def measured(options: argparse.Namespace, report: dict[str, Any]) -> tuple[list[str], list]:
    """Each section chosen, measured into ``report``: the lines to print and the targets."""
    table, held = [], []
    for section in SECTIONS:
        if section.NAME not in options.only:
            continue
        print(f"measuring {section.NAME} ...", file=sys.stderr)
        try:
            result = section.measure(options)
        except Interrupted:
            raise
        except Exception as error:  # noqa: BLE001 (one broken section keeps the others)
            report[section.NAME] = {"error": repr(error)}
            table.append(f"{section.NAME}: could not be measured: {error!r}")
            continue
        report[section.NAME] = result
        table += section.lines(result)
        if hasattr(section, "targets") and result is not None:
            held += section.targets(result)
    return table, held
