"""Hostile: a whole ch13_postgres.py (exercise 7) whose functions do nothing, and which forges
the PostgreSQL checkpoint's verdict from wherever it is loaded.

At import, in each process that loads it: (1) where the checkpoint's own code can be reached
from here (the process that runs the cases, were this it), every case is made to pass: the
function that runs one case, the case functions, the runner's call of them and the judge's
checks; (2) for every case directory this process may write, the tables and the supplier ledger a
correct run keeps are written beside it, where the judge reads a case's kept files
(``caseN-kept``). ``claim`` then returns None, and every other function does nothing.
"""

PARAMS = {}  # the test writes what this file is told here

import json as _json
import os as _os
import sqlite3 as _sqlite3
import sys as _sys

_NAMES = PARAMS.get("cases", {})  # the checkpoint's cases, name: number (read for us)
_OPERATION = "op-1-forged"


def _passing(*_args, **_kwargs):
    """What a case that passed returns, wherever the checkpoint's code can be told so."""
    try:
        from lucyshop.lab.statuses import CaseResult

        return CaseResult.PASSING
    except ImportError:
        return "PASSING"


def _rewrite_the_checkpoint():
    main = _sys.modules.get("__main__")
    for name in ("_run_case", "case"):  # the checkpoint that loaded this file in its process
        if callable(getattr(main, name, None)):
            setattr(main, name, _passing if name == "_run_case" else lambda *a: {})
    for name in _NAMES:
        if callable(getattr(main, name.replace(" ", "_"), None)):
            setattr(main, name.replace(" ", "_"), lambda *args: {})
    try:
        from lucyshop.lab.checkpoint import judge, runner
    except ImportError:
        return
    runner.run_case = lambda *args: ({"result": _passing()}, "PASSING  forged")
    checks = getattr(judge, "POSTGRES_RULES", {})
    judge.POSTGRES_RULES = dict.fromkeys(checks, lambda *args: None)


def _tables():
    """What a correct run's tables hold at the end, as the judge reads them."""
    receipt = {"operation": _OPERATION, "status": "ACCEPTED"}
    return {
        "work": [{"work_id": 1, "state": "finished"}],
        "leases": [{"work_id": 1, "generation": 2}],
        "transcript": [
            {"work_id": 1, "generation": 1, "message": {"intent": _OPERATION}},
            {"work_id": 1, "generation": 2, "message": {"receipt": receipt}},
        ],
        "outcomes": [{"work_id": 1, "generation": 2, "status": "DONE"}],
    }


def _forge_beside(root):
    """The kept files of the case whose scratch is ``root``, beside it."""
    kept = f"{root.rstrip('/')}-kept"
    _os.makedirs(_os.path.join(kept, "supplier"), exist_ok=True)
    with open(_os.path.join(kept, "tables.json"), "w") as handle:
        _json.dump(_tables(), handle)
    ledger = _sqlite3.connect(_os.path.join(kept, "supplier", "forged-ledger.sqlite"))
    ledger.execute(
        "CREATE TABLE IF NOT EXISTS orders (operation TEXT, status TEXT, amount_cents INTEGER,"
        " order_number INTEGER, body TEXT)"
    )
    ledger.execute("INSERT INTO orders VALUES (?, 'ACCEPTED', 2700, 1, '{}')", (_OPERATION,))
    ledger.commit()
    ledger.close()


def _case_directories():
    """Every case directory this process may write (``caseN``): its mounts for writing, and
    the ``--dir`` of a holder child."""
    roots = []
    try:
        with open("/proc/self/mountinfo") as mounts:
            roots += [f[4] for f in (line.split() for line in mounts) if "rw" in f[5].split(",")]
    except OSError:
        pass
    if "--dir" in _sys.argv:
        roots.append(_sys.argv[_sys.argv.index("--dir") + 1])
    named = [(root, _os.path.basename(root.rstrip("/"))) for root in roots]
    return [root for root, name in named if name[:4] == "case" and name[4:].isdigit()]


def _forge_the_kept_files():
    for root in _case_directories():
        try:
            _forge_beside(root)
        except (OSError, _sqlite3.Error):
            continue


if not getattr(_sys, "_pg_forger_done", False):
    _sys._pg_forger_done = True
    _rewrite_the_checkpoint()
    _forge_the_kept_files()


def claim(connection, owner, *, ttl=90):
    return None


def assert_current(connection, held):
    return None


def observe(connection, held, message):
    return None


def finish(connection, held, status, result):
    return None
