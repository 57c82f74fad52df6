"""``python -m lucyshop.lab.check``: see ``lucyshop.lab.check``."""

import sys

from lucyshop.lab.check.report import main

sys.exit(main())
