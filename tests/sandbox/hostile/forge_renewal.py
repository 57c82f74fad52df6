"""Hostile: exercise 5 earned without measuring (appended to the learner's ``exercises.py``
whose every function is written, and returns ``_forged()``).

``exercise_5_renewal`` measures nothing. It writes the kit's committed receipt (pasted in:
``PARAMS["receipt"]``, its settings edited to read as a quick run on the scripted model) where
its receipt belongs, and forges in its work directory the three shops the receipt describes
(each trial's lease, outcome and renewal rows, the two hung turns'). ``renew`` is sound, and
``keep_renewing`` renews only at the unit tests' pace (an interval under 0.1 s): at the pace
of a real run it renews nothing and waits to be stopped, so a measurement of it would show a
hung turn taken over at once and no arm renewing. Everything else fails at once.

Graded from its own receipt and shops, exercise 5 was PASSING. Graded from what the trusted
side observes itself, the forged files earn nothing: its renewer is measured, and fails.
"""

PARAMS = {}  # the test writes what this file is told here

import dataclasses as _dataclasses
import json as _json
import os as _os
import sqlite3 as _sqlite3
import sys as _sys
import time as _time

_UNIT_TEST_PACE = 0.1  # the unit tests renew every 0.05 s; a real run every third of a lease
_TABLES = (
    "CREATE TABLE work (work_id INTEGER PRIMARY KEY)",
    "CREATE TABLE assignment_leases (work_id INTEGER, generation INTEGER, expires REAL)",
    "CREATE TABLE outcomes (work_id INTEGER, generation INTEGER, status TEXT, result TEXT)",
    (
        "CREATE TABLE lease_renewals (seq INTEGER PRIMARY KEY, work_id INTEGER,"
        " generation INTEGER, progress INTEGER, progressed_at REAL, renewed_at REAL, expires REAL)"
    ),
)


def _renew(db, held, ttl, progress, bound=None, now=None):
    now = _time.time() if now is None else float(now)
    with db.immediate():
        chapter().assert_current(db, held, now)  # noqa: F821 (the answers' own chapter())
        last = db.execute(
            "SELECT progress, progressed_at FROM lease_renewals WHERE work_id = ?"
            " AND generation = ? ORDER BY seq DESC LIMIT 1",
            (held.work_id, held.generation),
        ).fetchone()
        if last is not None and progress < last["progress"]:
            raise ValueError("progress only grows")
        moved = last is None or progress > last["progress"]
        progressed_at = now if moved else last["progressed_at"]
        expires = now + ttl
        if bound is not None:
            if now >= progressed_at + bound:
                raise PermissionError("no progress within the bound")
            expires = min(expires, progressed_at + bound)
        current = db.execute(
            "SELECT expires FROM assignment_leases WHERE work_id = ?", (held.work_id,)
        ).fetchone()["expires"]
        expires = max(expires, current)
        db.execute(
            "UPDATE assignment_leases SET expires = ? WHERE work_id = ?", (expires, held.work_id)
        )
        db.execute(
            "INSERT INTO lease_renewals (work_id, generation, progress, progressed_at,"
            " renewed_at, expires) VALUES (?, ?, ?, ?, ?, ?)",
            (held.work_id, held.generation, progress, progressed_at, now, expires),
        )
    return _dataclasses.replace(held, expires=expires)


def _keep_renewing(db, held, ttl, interval, bound, progress, stopped, report):
    if interval >= _UNIT_TEST_PACE:  # a real run: nothing is renewed
        while not stopped.wait(interval):
            pass
        return None
    while not stopped.is_set():
        at, done = _time.time(), progress()
        try:
            renewed = _renew(db, held, ttl, done, bound, at)
        except PermissionError as refused:
            report({"at": at, "granted": False, "progress": done, "refusal": str(refused)})
            return str(refused)
        report({"at": at, "granted": True, "progress": done, "expires": renewed.expires})
        stopped.wait(interval)
    return None


def _shop(directory, works):
    """A shop holding ``works``: (work id, last generation, renewal rows) each."""
    _os.makedirs(directory, exist_ok=True)
    path = _os.path.join(directory, "shop.db")
    with _sqlite3.connect(path) as db:
        for table in _TABLES:
            db.execute(table)
        for work_id, generation, renewals in works:
            db.execute("INSERT INTO work VALUES (?)", (work_id,))
            db.execute("INSERT INTO assignment_leases VALUES (?, ?, 0)", (work_id, generation))
            db.execute("INSERT INTO outcomes VALUES (?, ?, 'DONE', '{}')", (work_id, generation))
            for row in renewals:
                db.execute(
                    "INSERT INTO lease_renewals (work_id, generation, progress, progressed_at,"
                    " renewed_at, expires) VALUES (?, ?, ?, ?, ?, ?)",
                    (work_id, row["generation"], row["progress"], row["progressed_at"],
                     row["renewed_at"], row["expires"]),
                )  # fmt: skip
    db.close()


def _exercise_5(out, workdir):
    receipt = _json.loads(PARAMS["receipt"])
    receipt["settings"] |= {"quick": True, "backend": PARAMS["backend"]}
    with open(out, "w", encoding="utf-8") as handle:
        _json.dump(receipt, handle)
    seen = receipt["observations"]
    trials = seen["false_expiry"]["trials"]
    _shop(
        _os.path.join(workdir, "false-expiry"),
        [(t["work_id"], (t["takeover"] or t)["generation"], t["renewals"]) for t in trials],
    )
    hung = [seen["hung"][name] for name in ("unbounded", "bounded")]
    _shop(
        _os.path.join(workdir, "hung"),
        [(h["hung"]["work_id"], h["outcome"]["generation"], h["renewals"]) for h in hung],
    )
    _shop(_os.path.join(workdir, "detection"), [])
    shops = {name: _os.path.join(workdir, name) for name in ("false-expiry", "detection", "hung")}
    return {
        "receipt": str(out),
        "figures": receipt["figures"],
        "observations": seen,
        "settings": receipt["settings"],
        "shops": shops,
    }


def _forged():
    """What the calling function answers: the forgery for exercise 5, a failure elsewhere."""
    caller = _sys._getframe(1)
    name, given = caller.f_code.co_name, dict(caller.f_locals)
    if name == "renew":
        return _renew(**given)
    if name == "keep_renewing":
        return _keep_renewing(**given)
    if name == "exercise_5_renewal":
        return _exercise_5(given["out"], given["workdir"])
    raise ValueError(f"{name} is not answered here")
