"""Section ``detection``: |measured - predicted| mean detection delay in the committed Part A
receipt, as a share of the scan interval."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lucyshop.lab.loader import ROOT

NAME = "detection"
RECEIPT = ROOT / "evidence" / "ch13-leases-receipt.json"


def measure(options: argparse.Namespace) -> dict[str, Any] | None:
    if not RECEIPT.exists():
        return None
    detection = json.loads(RECEIPT.read_text())["figures"]["detection"]
    scan = detection["scan"]
    error = abs(detection["measured_mean_delay"] - detection["predicted_delay"])
    return {
        "receipt": str(RECEIPT.relative_to(ROOT)),
        "abs_error_s": error,
        "scan_s": scan,
        "share_of_scan": error / scan,
    }


def lines(result: dict[str, Any] | None) -> list[str]:
    if result is None:
        return ["detection: no committed receipt to read"]
    return [
        (
            f"detection: |measured - predicted| = {1000 * result['abs_error_s']:.1f} ms = "
            f"{result['share_of_scan']:.2f} of the {1000 * result['scan_s']:.0f} ms scan"
        )
    ]
