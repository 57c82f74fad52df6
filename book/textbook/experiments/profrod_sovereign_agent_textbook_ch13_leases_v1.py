"""The book's path to Part A's experiment: ``python -m lucyshop.lab.experiment`` on the
learner's file, with the same options (``--out FILE`` and the rest; ``--help`` lists them).
With ``LUCYSHOP_BOOK_QUICK=1`` in the environment it runs ``--quick``: minutes, not twenty."""

import sys
from pathlib import Path

from lucyshop.lab.book import run_experiment

if __name__ == "__main__":
    sys.exit(run_experiment(Path(__file__), sys.argv[1:]))
