"""Hostile: exercise 5's bounded renewer extends no lease and writes its own record of renewals
instead (appended to the learner's ``exercises.py`` whose every function is written, and
returns ``_forged()``).

``renew`` is sound, and so is ``keep_renewing`` without a bound or at the unit tests' pace (an
interval under 0.1 s). At a real run's pace with a bound, each "renewal" is only its record:
a ``lease_renewals`` row holding what a sound renewal would hold (fenced by
``assert_current``, capped at the bound) and a granted ``report=`` entry, while the lease
itself is left at the claim's end. When that lease runs out, the refusal ``assert_current``
gives is reported, as a bounded renewer's would be. Everything else fails at once.

Graded from the rows and the report entries the answers write, exercise 5 was PASSING: every
renewing trial has rows, the bounded hung turn's rows stop before its takeover and a refusal
is reported. Graded from the leases the measuring side watches itself, it fails: no bounded
lease was ever extended.
"""

PARAMS = {}  # the test writes what this file is told here

import dataclasses as _dataclasses
import sys as _sys
import time as _time

_UNIT_TEST_PACE = 0.1  # the unit tests renew every 0.05 s; a real run every third of a lease


def _renew(db, held, ttl, progress, bound=None, now=None, extend=True):
    now = _time.time() if now is None else float(now)
    with db.immediate():
        current = chapter().assert_current(db, held, now)  # noqa: F821 (the answers' chapter())
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
        expires = max(expires, current)
        if extend:
            db.execute(
                "UPDATE assignment_leases SET expires = ? WHERE work_id = ? AND generation = ?",
                (expires, held.work_id, held.generation),
            )
        db.execute(
            "INSERT INTO lease_renewals (work_id, generation, progress, progressed_at,"
            " renewed_at, expires) VALUES (?, ?, ?, ?, ?, ?)",
            (held.work_id, held.generation, progress, progressed_at, now, expires),
        )
    return _dataclasses.replace(held, expires=expires)


def _keep_renewing(db, held, ttl, interval, bound, progress, stopped, report):
    extend = bound is None or interval < _UNIT_TEST_PACE  # else: a record, and no renewal
    while not stopped.is_set():
        at, done = _time.time(), progress()
        try:
            renewed = _renew(db, held, ttl, done, bound, at, extend=extend)
        except PermissionError as refused:
            report({"at": at, "granted": False, "progress": done, "refusal": str(refused)})
            return str(refused)
        report({"at": at, "granted": True, "progress": done, "expires": renewed.expires})
        stopped.wait(interval)
    return None


def _forged():
    """What the calling function answers: exercise 5's renewer, a failure elsewhere."""
    caller = _sys._getframe(1)
    name, given = caller.f_code.co_name, dict(caller.f_locals)
    if name == "renew":
        return _renew(**given)
    if name == "keep_renewing":
        return _keep_renewing(**given)
    raise ValueError(f"{name} is not answered here")
