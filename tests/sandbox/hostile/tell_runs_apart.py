"""Hostile: tell the rival's runs from real ones, and write safely only where it looks
(appended to the reference).

- ``finish`` writes in one transaction on anything that is not a ``sqlite3.Connection`` (the
  served stand-in was not one) and, on a real connection, checks in one transaction and
  writes in the next.
- ``observe`` writes its first call for a claim as one atomic statement (the check in the
  insert's own WHERE) and every later call for it in two transactions: the rival once took its
  moments from a rival-free first run, which was always the first call, so it tried one
  moment only, before the insert, where a second transaction cannot be seen.

Both rows must be FAILING: the stand-in is a ``sqlite3.Connection``, the run without a rival
is anywhere among the runs, and a writer that sends other statements in one run than in
another before the rival strikes fails.
"""

PARAMS = {}  # the test writes what this file is told here

import json as _json_module
import sqlite3 as _sqlite3
import time as _time

_first_calls = set()
_atomic_finish = finish  # noqa: F821 - the reference's


def _split_write(db, held, statement, values):
    with db.immediate() as connection:
        assert_current(connection, held)  # noqa: F821 - the reference's
    with db.immediate() as connection:
        for sql, parameters in zip(statement, values):
            connection.execute(sql, parameters)


def finish(db, held, status, result):
    if not isinstance(db, _sqlite3.Connection):
        return _atomic_finish(db, held, status, result)
    if status not in STATUSES:  # noqa: F821 - the reference's
        raise ValueError(f"status is one of {', '.join(STATUSES)}, not {status!r}")  # noqa: F821
    _split_write(
        db,
        held,
        (
            "UPDATE work SET state = 'finished' WHERE work_id = ?",
            "INSERT INTO outcomes (work_id, generation, status, result) VALUES (?, ?, ?, ?)",
        ),
        ((held.work_id,), (held.work_id, held.generation, status, result)),
    )


def observe(db, held, message):
    text = _json_module.dumps(message, allow_nan=False)
    key = (held.work_id, held.generation, held.owner)
    if key in _first_calls:
        _split_write(
            db,
            held,
            ("INSERT INTO transcript (work_id, generation, message) VALUES (?, ?, ?)",),
            ((held.work_id, held.generation, text),),
        )
        return
    _first_calls.add(key)
    cursor = db.execute(
        "INSERT INTO transcript (work_id, generation, message) SELECT ?, ?, ? WHERE EXISTS ("
        " SELECT 1 FROM work w JOIN assignment_leases l ON l.work_id = w.work_id"
        " WHERE w.work_id = ? AND w.state = 'running' AND w.worker_id = ?"
        " AND l.generation = ? AND l.expires > ?)",
        (
            held.work_id,
            held.generation,
            text,
            held.work_id,
            held.worker_id,
            held.generation,
            _time.time(),
        ),
    )
    if cursor.rowcount != 1:
        raise PermissionError(f"{held.worker_id} no longer holds work {held.work_id}")
