"""Hostile: hold more memory in one sandbox than any one process may (appended to the
reference).

``percentile`` starts ``PARAMS["children"]`` children at once, each touching
``PARAMS["mib"]`` MiB, each under the per-process limit; together they hold more than a
sandbox may. It then raises, saying how many held their memory to the end
(``held=N of M``), so the test reads it from the row's message; once per worker process
(each test loads the file afresh, so the count is kept on ``sys``). Three of 1.3 GiB once all
held (issue 47): a memory limit on the whole sandbox must end at least one.
"""

PARAMS = {}  # the test writes what this file is told here

import subprocess as _subprocess
import sys as _sys

_CHILD = (
    "import sys, time\n"
    "block = bytearray(int(sys.argv[1]) * 2**20)\n"
    "for at in range(0, len(block), 4096):\n"
    "    block[at] = 1\n"
    "print('held', flush=True)\n"
    "time.sleep(3)\n"
)


def percentile(values, q):
    count = PARAMS["children"]
    if not hasattr(_sys, "_hostile_held"):
        children = [
            _subprocess.Popen(
                [_sys.executable, "-c", _CHILD, str(PARAMS["mib"])],
                stdout=_subprocess.PIPE,
                stderr=_subprocess.DEVNULL,
                text=True,
            )
            for _ in range(count)
        ]
        outputs = [child.communicate(timeout=120)[0].strip() for child in children]
        _sys._hostile_held = outputs.count("held")
    raise RuntimeError(f"held={_sys._hostile_held} of {count}")
