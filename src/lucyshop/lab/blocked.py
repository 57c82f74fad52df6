"""``python -m lucyshop.lab.blocked TARGET [ARGS...]``: run a module or script with the reference
blocked.

The lab's children started through ``services.processes.python_argv`` (its default: the
experiment's workers, the soak's chaos workers, the bench's pool) go through here, so the
blocker is in place before a single line of the student's code (or of the child's own code)
runs; the one file allowed is the implementation named by ``$LEASES_IMPL``. Not every child
does: ``make check``'s pytest children and checkpoint never import the student's file, whose
code runs in the sandbox (``lucyshop.lab.sandbox``), and the supplier needs no blocker.
"""

import os
import runpy
import sys

from lucyshop.lab.loader import block_for


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m lucyshop.lab.blocked MODULE|SCRIPT.py [ARGS...]")
    target = sys.argv[1]
    block_for()
    sys.argv = sys.argv[1:]
    if target.endswith(".py"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))  # as `python script.py` would
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
