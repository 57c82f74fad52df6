"""Section ``checkpoint``: the real lease waits of the process-kill checkpoint against everything
else it does (process and server start)."""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.launch import checkpoint_command
from lucyshop.lab.services.limits import CHECKPOINT_SECONDS
from lucyshop.proof.bench.stats import spread

NAME = "checkpoint"


def measure(options: argparse.Namespace) -> dict[str, Any]:
    waits, totals = [], []
    for _ in range(options.repeats):
        with tempfile.TemporaryDirectory(prefix="ch13-bench-cp-") as tmp:
            evidence = Path(tmp) / "evidence.json"
            subprocess.run(
                checkpoint_command(options.impl_path, evidence=evidence),
                check=True,
                capture_output=True,
                timeout=CHECKPOINT_SECONDS,
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
