"""``python -m lucyshop.lab.bench``: see ``lucyshop.lab.bench``."""

import sys

from lucyshop.lab.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
