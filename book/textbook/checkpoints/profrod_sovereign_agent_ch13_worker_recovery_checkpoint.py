"""The book's path to the chapter's checkpoint: the kit's ``checkpoints/ch13_worker_recovery.py``
on the learner's file, with the same options. A bare ``--evidence``, as the chapter types it,
writes ``learner/runs/ch13-worker-recovery-evidence.json`` and prints that path."""

import sys
from pathlib import Path

from lucyshop.lab.book import run_checkpoint

if __name__ == "__main__":
    run_checkpoint(Path(__file__), sys.argv[1:])
