"""``python -m lucyshop.proof.bench``: see ``lucyshop.proof.bench``."""

import sys

from lucyshop.proof.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
