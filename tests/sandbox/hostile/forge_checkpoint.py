"""Hostile: forge the checkpoint's verdict from inside its sandbox (appended to a student file
whose every function returns None).

At import this file (1) rewrites the checkpoint's case list and the judge's checks wherever
they can be reached from here, and (2) starts a thread that, for every directory it may write
(a case's own directory, or one shared by every case), keeps writing the shop file and the
supplier ledger a correct run would have kept, and the evidence file that says every case
passed: beside the case, in the directory above it, and wherever the evidence already is.
"""

PARAMS = {}  # the test writes what this file is told here


import json as _json
import os as _os
import sqlite3 as _sqlite3
import sys as _sys
import threading as _threading
import time as _time

_NAMES = PARAMS["cases"]  # the checkpoint's cases, name: number (the test reads them for us)
_NUMBERED = {number: name for name, number in _NAMES.items()}
_SCHEMA = (
    "CREATE TABLE work (work_id INTEGER PRIMARY KEY, state TEXT)",
    "CREATE TABLE outcomes (work_id INTEGER, generation INTEGER, status TEXT)",
    "CREATE TABLE transcript (work_id INTEGER, generation INTEGER)",
    "CREATE TABLE assignment_leases (work_id INTEGER, generation INTEGER)",
    "CREATE TABLE assistant_orders (order_id INTEGER PRIMARY KEY, operation TEXT, status TEXT,"
    + " amount_cents INTEGER)",
    "CREATE TABLE spending_account (reserved_cents INTEGER, spent_cents INTEGER)",
)


def _rows(number):
    """What the judge reads back for case ``number``, table by table."""
    if _NUMBERED.get(number) == "fence":
        return {
            "work": [(1, "finished"), (2, "running")],
            "outcomes": [(1, 2, "DONE")],
            "transcript": [(1, 2)],
            "assignment_leases": [(1, 2), (2, 1)],
        }
    if _NUMBERED.get(number) == "cancel":
        return {
            "work": [(1, "finished")],
            "outcomes": [(1, 2, "CANCELED")],
            "assignment_leases": [(1, 2)],
            "assistant_orders": [(1, "op-1", "ACCEPTED", 2700), (2, "op-2", "REVOKED", 1800)],
            "spending_account": [(0, 2700)],
        }
    return {
        "work": [(1, "finished")],
        "outcomes": [(1, 2, "DONE")],
        "assistant_orders": [(1, "op-1", "ACCEPTED", 2700)],
        "spending_account": [(0, 2700)],
    }


def _database(path, statements, rows):
    partial = path + ".forging"
    if _os.path.exists(partial):
        _os.unlink(partial)
    db = _sqlite3.connect(partial)
    for statement in statements:
        db.execute(statement)
    for table, values in rows.items():
        for value in values:
            db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(value))})", value)
    db.commit()
    db.close()
    _os.replace(partial, path)


def _stage_case(stage, number):
    """Case ``number``'s forged shop and ledger, made ahead of time under ``stage``."""
    case = _os.path.join(stage, f"case{number}")
    _os.makedirs(case, exist_ok=True)
    _database(_os.path.join(case, "shop.db"), _SCHEMA, _rows(number))
    ledger = "CREATE TABLE orders (operation TEXT, status TEXT, amount_cents INTEGER,"
    ledger += " order_number INTEGER, body TEXT)"
    order = [("op-1", "ACCEPTED", 2700, 1, "{}")]
    _database(_os.path.join(case, "forged-ledger.sqlite"), (ledger,), {"orders": order})


def _forge_case(root, stage, number):
    """Rename the staged files over what the case kept (a rename takes microseconds)."""
    case, staged = _os.path.join(root, f"case{number}"), _os.path.join(stage, f"case{number}")
    supplier = _os.path.join(case, "supplier")
    _os.makedirs(supplier, exist_ok=True)
    for name in _os.listdir(supplier):
        if name.endswith("-ledger.sqlite"):
            _os.unlink(_os.path.join(supplier, name))
    _os.replace(_os.path.join(staged, "shop.db"), _os.path.join(case, "shop.db"))
    ledger = _os.path.join(supplier, "forged-ledger.sqlite")
    _os.replace(_os.path.join(staged, "forged-ledger.sqlite"), ledger)


def _forged_evidence(stage):
    cases = {name: {"case": n, "result": "PASSING"} for name, n in _NAMES.items()}
    cases["arithmetic"] |= {"p50": 0.7, "p90": 1.2, "detection_delay": 3.6}
    ready = _os.path.join(stage, "evidence.json")
    with open(ready, "w") as handle:
        _json.dump({"schema": "forged", "exit_status": 0, "cases": cases}, handle)
    return ready


def _try(function, *args):
    try:
        function(*args)
    except OSError:
        pass


def _forge(root):
    """Forge whatever this sandbox may write, again and again, until it is ended."""
    stage = _os.path.join(root, ".forged")
    _os.makedirs(stage, exist_ok=True)
    name = _os.path.basename(root)
    own = int(name[4:]) if name[:4] == "case" and name[4:].isdigit() else None
    parent = _os.path.dirname(root)
    while True:
        for number in [own] if own else [n for n in _NUMBERED if _NUMBERED[n] != "arithmetic"]:
            base = parent if own else root
            _try(_stage_case, stage, number)
            _try(_forge_case, base, stage, number)
            _try(_forge_ledger_beside, base, number)
        for place in (root, parent):
            _try(_evidence_at, stage, place)
        _time.sleep(0.05)


def _evidence_at(stage, place):
    _os.replace(_forged_evidence(stage), _os.path.join(place, "evidence.json"))


def _forge_ledger_beside(base, number):
    """The ledger where a case keeps its supplier outside its own directory."""
    supplier = _os.path.join(base, f"case{number}-supplier")
    ledger = "CREATE TABLE orders (operation TEXT, status TEXT, amount_cents INTEGER,"
    ledger += " order_number INTEGER, body TEXT)"
    order = [("op-1", "ACCEPTED", 2700, 1, "{}")]
    _os.makedirs(supplier, exist_ok=True)
    _database(_os.path.join(supplier, "forged-ledger.sqlite"), (ledger,), {"orders": order})


def _writable_roots():
    """Every directory shared with this sandbox for writing (its scratch)."""
    with open("/proc/self/mountinfo") as mounts:
        fields = [line.split() for line in mounts]
    points = [f[4] for f in fields if "rw" in f[5].split(",")]
    shared = [
        p for p in points if p not in ("/", "/tmp") and p.split("/")[1] not in ("proc", "dev")
    ]
    return [p for p in shared if _os.path.isdir(p)]


def _rewrite_the_case_list():
    """Where the checkpoint's own modules can be reached from here, make every case pass: its
    case functions (were this its process), its runner's lookup of them, the judge's checks."""
    main = _sys.modules.get("__main__")
    for name in _NAMES:
        if callable(getattr(main, name.replace(" ", "_"), None)):
            setattr(main, name.replace(" ", "_"), lambda *args: {})
    try:
        from lucyshop.lab.checkpoint import judge, runner

        runner.case_functions = lambda namespace: {c: lambda *a: {} for c in runner.CASES}
        judge.RULES = dict.fromkeys(judge.RULES, lambda *args: None)
    except ImportError:
        pass


if not getattr(_sys, "_forger_started", False):
    _sys._forger_started = True
    _rewrite_the_case_list()
    for _root in _writable_roots():
        _threading.Thread(target=_forge, args=(_root,), daemon=True).start()
