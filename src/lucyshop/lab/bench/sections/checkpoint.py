"""Section ``checkpoint``: the real lease waits of the process-kill checkpoint against everything
else it does (process and server start)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lucyshop.lab.bench.stats import spread
from lucyshop.lab.check.watcher import CHECKPOINT
from lucyshop.lab.loader import ROOT

NAME = "checkpoint"


def measure(options: argparse.Namespace) -> dict[str, Any]:
    waits, totals = [], []
    for _ in range(options.repeats):
        with tempfile.TemporaryDirectory(prefix="ch13-bench-cp-") as tmp:
            evidence = Path(tmp) / "evidence.json"
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / CHECKPOINT),
                    "--impl",
                    str(options.impl_path),
                    "--evidence",
                    str(evidence),
                ],
                check=True,
                capture_output=True,
                timeout=300,
            )
            data = json.loads(evidence.read_text())
        totals.append(data["seconds"])
        waits.append(sum(case.get("waited_seconds", 0) for case in data["cases"].values()))
    return {
        "total_s": spread(totals),
        "lease_wait_s": spread(waits),
        "lease_wait_share": spread([w / t for w, t in zip(waits, totals, strict=True)]),
    }


def lines(result: dict[str, Any]) -> list[str]:
    return [
        (
            f"checkpoint: {result['total_s']['median']:.1f} s total, "
            f"{result['lease_wait_s']['median']:.1f} s real lease waits "
            f"({100 * result['lease_wait_share']['median']:.0f}%)"
        )
    ]
