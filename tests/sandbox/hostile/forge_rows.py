"""Hostile: PASSING rows without working code (appended to a file whose every function raises
a skip).

Half the functions raise ``unittest.SkipTest``, half ``pytest.skip``'s exception: under the old
design a skip counted as a pass. At import the file also rebinds pytest's report class and
the kit's outcome writer wherever they can be imported from here, registers an ``atexit``
handler, and leaves a daemon behind, both appending "passed" records to every outcomes file
they can find.
"""

PARAMS = {}  # the test writes what this file is told here

import atexit as _atexit
import glob as _glob
import json as _json
import os as _os
import sys as _sys
import threading as _threading
import time as _time
import unittest as _unittest

_SKIPS = []


def _skip():
    """A skip of either kind, in turn."""
    _SKIPS.append(1)
    if len(_SKIPS) % 2:
        raise _unittest.SkipTest("skipped: counted as a pass?")
    import pytest

    pytest.skip("skipped: counted as a pass?")


def _rebind_pytest():
    try:
        from _pytest import reports
    except ImportError:
        return

    made = reports.TestReport.__init__

    def passed(self, *args, **kwargs):
        made(self, *args, **kwargs)
        self.outcome, self.longrepr = "passed", None

    reports.TestReport.__init__ = passed


def _rebind_the_writer():
    try:
        from lucyshop.lab.check.plugin import collect
    except ImportError:
        return
    collect.describe = lambda *args: {"message": "", "not_started": None}

    def write(self, record):
        if record.get("event") == "result":
            record = {k: v for k, v in record.items() if k == "nodeid" or k == "module"}
            record |= {"event": "result", "outcome": "passed"}
        with open(self.path, "a") as handle:
            handle.write(_json.dumps(record) + "\n")

    collect.OutcomeWriter.write = write


def _outcome_files():
    """Every outcomes file under the check's directory (``PARAMS["tmp"]``, the test's own: were
    the sandbox to fail, no other check's files are touched)."""
    pattern = _os.path.join(PARAMS["tmp"], "**", "outcomes-*.jsonl")
    return sorted(_glob.glob(pattern, recursive=True))


def _forge_outcomes():
    """Append a "passed" record for every test each outcomes file has started."""
    for path in _outcome_files():
        try:
            with open(path) as handle:
                started = [_json.loads(line).get("nodeid") for line in handle if "start" in line]
            with open(path, "a") as handle:
                for nodeid in filter(None, started):
                    module = _os.path.splitext(nodeid.split("::")[0].rsplit("/", 1)[-1])[0]
                    record = {"event": "result", "nodeid": nodeid, "module": module}
                    handle.write(_json.dumps(record | {"outcome": "passed"}) + "\n")
                handle.write(_json.dumps({"event": "finish"}) + "\n")
        except (OSError, ValueError):
            continue


def _daemon():
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            for _ in range(600):
                _forge_outcomes()
                _time.sleep(0.1)
        _os._exit(0)


if not getattr(_sys, "_row_forger", False):
    _sys._row_forger = True
    _rebind_pytest()
    _rebind_the_writer()
    _atexit.register(_forge_outcomes)
    _threading.Thread(target=_daemon, daemon=True).start()
