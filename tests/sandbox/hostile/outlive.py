"""Hostile, in user mode (root where no bubblewrap can start): code that means to outlive its
check (appended to a file whose every function raises ``_Outlive``, whose message says what
it got).

At its first import in a process it:
- starts eight daemons, each double-forked into a session of its own with an empty
  environment (no marker to find them by), sleeping ten minutes;
- forks sleeping children until it has ``PARAMS["forks"]`` or the kernel refuses one;
- leaves a file named with ``PARAMS["token"]`` in each of /tmp, /var/tmp and /dev/shm.
"""

PARAMS = {}  # the test writes what this file is told here

import os as _os
import sys as _sys
import time as _time

_GOT = _sys.__dict__.setdefault("_outlive_got", {"forked": 0, "refused": "", "files": 0})


class _Outlive(RuntimeError):
    def __init__(self):
        super().__init__(f"outlive: {_GOT}")


def _daemon():
    first = _os.fork()
    if first:
        _os.waitpid(first, 0)
        return
    _os.setsid()
    if _os.fork():
        _os._exit(0)
    script = "import time; time.sleep(600)"
    _os.execve(_sys.executable, [_sys.executable, "-c", script, PARAMS["token"]], {})


def _leave_files():
    for place in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(_os.path.join(place, f"left-{PARAMS['token']}"), "w") as handle:
                handle.write("still here\n")
            _GOT["files"] += 1
        except OSError:
            continue


def _fork_all():
    while _GOT["forked"] < PARAMS["forks"]:
        try:
            pid = _os.fork()
        except OSError as error:
            _GOT["refused"] = error.strerror
            return
        if pid == 0:
            _time.sleep(600)
            _os._exit(0)
        _GOT["forked"] += 1


if not _sys.__dict__.get("_outlive_done"):
    _sys._outlive_done = True
    for _ in range(8):
        try:
            _daemon()
        except OSError:
            break
    _leave_files()
    _fork_all()
