"""``make demo``: run the real process-kill checkpoint against the reference and say what happened."""

from __future__ import annotations

import subprocess
import sys

from lucyshop.lab.loader import ROOT

EVIDENCE = ROOT / ".scratch" / "checkpoint-evidence.json"


def main() -> int:
    print("Chapter 13 demo: the checkpoint against solutions/ch13_leases.py, with real processes.\n"
          "A worker child claims an order, gets approval, and is killed (SIGKILL), left alive,\n"
          "paused (SIGSTOP) or killed after the supplier committed; a replacement waits out the\n"
          "real lease and continues from the records, never asking a model.\n")
    command = [sys.executable, str(ROOT / "checkpoints" / "ch13_worker_recovery.py"),
               "--impl", "solutions", "--evidence", str(EVIDENCE)]
    status = subprocess.run(command, cwd=ROOT, timeout=300).returncode
    print(f"\nevidence (every figure observed in this run): {EVIDENCE.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
