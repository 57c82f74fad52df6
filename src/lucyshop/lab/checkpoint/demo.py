"""``make demo``: run the real process-kill checkpoint against the reference,
then read back a shop it recovered.

The checkpoint keeps each case's files under ``.scratch/demo/caseN`` (``--keep``), so the demo
ends with ``python -m lucyshop status`` on the killed-holder case's shop: first the copy taken
just before the replacement ran (``shop-before-recovery.db``), then the shop it recovered. The
same four signals an operator would look at, computed from the records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lucyshop import status
from lucyshop.lab.checkpoint.cases import KILLED
from lucyshop.lab.checkpoint.launch import checkpoint_command
from lucyshop.lab.given.orders import OWNER
from lucyshop.lab.loader import ROOT
from lucyshop.lab.services.limits import CHECKPOINT_SECONDS

EVIDENCE = ROOT / ".scratch" / "checkpoint-evidence.json"
KEEP = ROOT / ".scratch" / "demo"


def killed_worker(case: Path) -> list[str]:
    """``--workers FILE`` naming the killed child by its pid on this machine, as this run's
    evidence recorded it (not its pid inside the sandbox, which may name another process
    here), so the status can show it gone."""
    try:
        facts = json.loads(EVIDENCE.read_text())["cases"][KILLED.name]
        pid = int(facts["child_pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no pid observed here: the status will say liveness is unknown
    registry = case / "workers.json"
    registry.write_text(json.dumps({OWNER: pid}) + "\n")
    return ["--workers", os.path.relpath(registry)]


def main() -> int:
    print(
        "Chapter 13 demo: the checkpoint against solutions/ch13_leases.py, with real processes.\n"
        "A worker child claims an order, gets approval, and is killed (SIGKILL), left alive,\n"
        "paused (SIGSTOP) or killed after the supplier committed; a replacement waits out the\n"
        "real lease and continues from the records, never asking a model.\n",
        flush=True,
    )
    command = checkpoint_command("solutions", evidence=EVIDENCE, keep=KEEP)
    outcome = subprocess.run(command, cwd=ROOT, timeout=CHECKPOINT_SECONDS, check=False).returncode
    print(
        f"\nevidence (every figure observed in this run): {EVIDENCE.relative_to(ROOT)}", flush=True
    )
    case = KEEP / f"case{KILLED.number}"
    before = os.path.relpath(case / "shop-before-recovery.db")
    shop = os.path.relpath(case / "shop.db")
    if not os.path.isfile(shop):
        print(
            f"\nno shop kept at {shop}: the checkpoint stopped before the killed-holder case"
            " finished (or it does not know --keep)"
        )
        return outcome or 1
    shown = 0
    if os.path.isfile(before):
        options = killed_worker(case)
        print(
            "\nThe killed-holder case's records as the replacement found them (a copy taken just\n"
            "before recover_once; leases are measured against the clock now):\n"
            f"  python -m lucyshop status {' '.join([before, *options])}\n",
            flush=True,
        )
        shown = status.main([before, *options, "--impl", "solutions"])
    print(
        f"\nThe same shop after the replacement recovered it (its supplier ended with the case):\n"
        f"  python -m lucyshop status {shop}\n",
        flush=True,
    )
    shown = status.main([shop, "--impl", "solutions"]) or shown
    return outcome or shown


if __name__ == "__main__":
    sys.exit(main())
