"""Hostile: write after the holder check in a transaction of its own, then look again and
undo the write if the work was taken over meanwhile (appended to the reference).

``observe`` inserts its row in a second transaction, looks at the lease's generation again in
a third, and deletes the row if it was superseded; ``finish`` does the same with its outcome
row, and moves the work's state only in the third, once it looks safe (the shop would not let
it move finished work back). When they return, the shop holds no stale row, so a rival that
compared only the final rows of the writer's table saw nothing (issue 47). But the new holder
could have read the row, and a crash between the write and the undo would have left it: both
rows must be FAILING, the writes after the takeover counted though undone.
"""

PARAMS = {}  # the test writes what this file is told here

import json as _json_module


def _write_then_undo(db, held, write, undo, settle=None):
    with db.immediate() as connection:
        assert_current(connection, held)  # noqa: F821 - the reference's
    with db.immediate() as connection:
        done = write(connection)
    with db.immediate() as connection:
        (generation,) = connection.execute(
            "SELECT generation FROM assignment_leases WHERE work_id = ?", (held.work_id,)
        ).fetchone()
        if generation != held.generation:  # superseded since the check: take the write back
            undo(connection, done)
        elif settle is not None:
            settle(connection)
    if generation != held.generation:  # raised once the undo is committed
        raise PermissionError(f"generation {held.generation} was superseded by {generation}")


def observe(db, held, message):
    text = _json_module.dumps(message, allow_nan=False)

    def write(connection):
        return connection.execute(
            "INSERT INTO transcript (work_id, generation, message) VALUES (?, ?, ?)",
            (held.work_id, held.generation, text),
        ).lastrowid

    def undo(connection, rowid):
        connection.execute("DELETE FROM transcript WHERE rowid = ?", (rowid,))

    _write_then_undo(db, held, write, undo)


def finish(db, held, status, result):
    if status not in STATUSES:  # noqa: F821 - the reference's
        raise ValueError(f"status is one of {', '.join(STATUSES)}, not {status!r}")  # noqa: F821

    def write(connection):
        return connection.execute(
            "INSERT INTO outcomes (work_id, generation, status, result) VALUES (?, ?, ?, ?)",
            (held.work_id, held.generation, status, result),
        ).lastrowid

    def undo(connection, rowid):
        connection.execute("DELETE FROM outcomes WHERE rowid = ?", (rowid,))

    def settle(connection):  # finished work stays finished: moved only once it is safe
        connection.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (held.work_id,))

    _write_then_undo(db, held, write, undo, settle)
