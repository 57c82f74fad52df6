"""How long ``make test`` takes: one timed run of the kit's whole pytest suite, as a JSON entry.

    python -m lucyshop.lab.evidence.testtime [--out FILE] [--bench FILE] [-- extra pytest arguments]

``measure()`` times one run; the command prints its entry, writes it to ``--out`` and puts it
into ``make bench``'s report (``--bench``) as its ``make_test`` section, so that the bench's
figures and the suite's duration are read in one place. Both writes go through the receipt
engine. The figure is only meaningful on a quiet machine, so the entry carries the load
average before and after, and the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lucyshop.lab.evidence import receipts
from lucyshop.lab.loader import ENV, ROOT

SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|error|skipped|deselected)\b.*?)\s*=*$")
DEADLINE_SECONDS = 3600.0


def pytest_command(extra: Sequence[str] = ()) -> list[str]:
    """What ``make test`` runs (the solutions, quiet), with ``extra`` pytest arguments."""
    return [sys.executable, "-m", "pytest", "-q", "--color=no", *extra]


def _summary(output: str) -> str:
    """pytest's last line of counts, e.g. ``812 passed, 3 skipped in 290.1s``."""
    for line in reversed(output.splitlines()):
        if match := SUMMARY.match(line.strip()):
            return match.group(1)
    return ""


def measure(
    extra: Sequence[str] = (), *, timeout: float = DEADLINE_SECONDS, log: Path | None = None
) -> dict[str, Any]:
    """Run the suite once on the solutions and return its duration and what it reported.

    ``log`` keeps pytest's whole output, to read what failed when the run did not pass."""
    command = pytest_command(extra)
    load_before = os.getloadavg()
    started_utc = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=os.environ | {ENV: "solutions"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    seconds = time.monotonic() - started
    if log is not None:
        log.write_text(done.stdout + done.stderr)
    return {
        "command": f"{ENV}=solutions " + " ".join(["python", *command[1:]]),
        "seconds": round(seconds, 1),
        "exit_status": done.returncode,
        "summary": _summary(done.stdout),
        "started_utc": started_utc,
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.evidence.testtime", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--out", type=Path, help="also write the entry as JSON here")
    parser.add_argument("--bench", type=Path, help="also put it into this bench report")
    parser.add_argument("--log", type=Path, help="keep pytest's whole output here")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    entry = measure(args.pytest_args, log=args.log)
    text = json.dumps(entry, indent=2) + "\n"
    print(text, end="")
    if args.out:
        receipts.write_receipt(args.out, entry)
    if args.bench:
        receipts.write_receipt(
            args.bench, {**receipts.read_receipt(args.bench), "make_test": entry}
        )
    return 0 if entry["exit_status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
