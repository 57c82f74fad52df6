"""Run the bench sections, print the table with each target held or missed, write the JSON."""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from lucyshop.lab import receipts
from lucyshop.lab.bench import checkpoint, detection, feedback, fence, grading, queues
from lucyshop.lab.loader import ROOT, impl_path

SECTIONS = (queues, fence, checkpoint, detection, feedback, grading)
PEER_PACKAGES = ("litequeue", "persist-queue")


def numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lucyshop.lab.bench", description=__doc__)
    p.add_argument("--out", type=Path)
    p.add_argument("--impl", default="learner", help="learner (default), solutions or a path")
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


def provenance(options: argparse.Namespace) -> dict[str, Any]:
    packages = {}
    for name in PEER_PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    impl = options.impl_path
    return {
        "schema": 2,
        "measured_utc": datetime.now(UTC).isoformat(),
        "command": sys.argv,
        "host": platform.node(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "peers": packages,
        "load_average_start": os.getloadavg(),
        "impl": str(impl.relative_to(ROOT)) if impl.is_relative_to(ROOT) else str(impl),
        "options": {k: v for k, v in vars(options).items() if k not in ("out", "impl_path")},
    }


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    unknown = set(options.only) - {m.NAME for m in SECTIONS}
    if unknown:
        parser().error(f"unknown sections: {', '.join(sorted(unknown))}")
    options.impl_path = impl_path(options.impl)
    report = provenance(options)
    started = time.monotonic()
    table, held = [], []
    for section in SECTIONS:
        if section.NAME not in options.only:
            continue
        print(f"measuring {section.NAME} ...", file=sys.stderr)
        try:
            result = section.measure(options)
        except Exception as error:  # noqa: BLE001 (one broken section keeps the others)
            report[section.NAME] = {"error": repr(error)}
            table.append(f"{section.NAME}: FAILED, {error!r}")
            continue
        report[section.NAME] = result
        table += section.lines(result)
        if hasattr(section, "targets") and result is not None:
            held += section.targets(result)
    report["targets"] = [t.as_dict() for t in held]
    report["load_average_end"] = os.getloadavg()
    report["seconds"] = time.monotonic() - started
    print("\n".join(table))
    if held:
        print("targets:")
        print("\n".join(t.line() for t in held))
    print(f"took {report['seconds']:.0f} s; load average {report['load_average_end'][0]:.2f}")
    if options.out:
        receipts.write_receipt(options.out, report)
        print(f"written: {options.out}")
    return 0
