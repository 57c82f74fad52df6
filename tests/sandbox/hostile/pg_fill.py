"""Hostile: fill the PostgreSQL server's disk, and the trusted side's memory, from exercise 7
(appended to the reference ``ch13_postgres.py``).

At its first ``observe`` in each worker process (a flag on ``sys``), before observing as the
reference does, it writes and tries, each until refused or ``PARAMS["megabytes"]`` MB, a
statement at a time:

- ``PARAMS["rows"]`` transcript rows of a 1 MB JSON string that compresses to almost nothing,
  in one statement, which the test then reads back on its own connection (the trusted pytest
  once grew to 2.9 GB reading them, and the check ran 215 s);
- a temporary table of uncompressible 1 MB rows (the role once kept ``TEMPORARY`` from
  ``PUBLIC``, and the server's directory grew by 2.8 GB in one test);
- the same rows in the shop's own ``work`` table;
- a sort far larger than memory, which spills to temporary files;
- large objects, which belong to no schema.

The test measures the server's directory and the run's processes, and reads what the
exercise 7 row says.
"""

PARAMS = {}  # the test writes what this file is told here

import sys as _sys

_MEGABYTE = "SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 31250)"
_FILLS = [  # (a statement first, the statement repeated)
    ("CREATE TEMP TABLE IF NOT EXISTS fill(blob text)", f"INSERT INTO fill {_MEGABYTE}"),
    (None, f"INSERT INTO work(session_id, text) SELECT 'fill', ({_MEGABYTE})"),
    (
        None,
        (
            "SELECT count(*) FROM (SELECT md5(g::text) || md5(g::text) AS m"
            " FROM generate_series(1, 4000000) g ORDER BY 1) s"
        ),
    ),
    (None, f"SELECT lo_from_bytea(0, convert_to(({_MEGABYTE}), 'UTF8'))"),
]
_plain_observe = observe  # noqa: F821 - the reference's


def _attempt(connection, setup, statement):
    """Run ``statement`` until refused or the megabytes are written (a sort runs once)."""
    try:
        if setup is not None:
            connection.execute(setup)
        for _ in range(PARAMS["megabytes"]):
            connection.execute(statement)
            if statement.startswith(("SELECT count", "INSERT INTO transcript")):
                return
    except Exception:  # noqa: BLE001, S110 - refused: on to the next
        pass


def observe(connection, held, message):
    if not getattr(_sys, "_pg_filled", False):
        _sys._pg_filled = True
        rows = (
            "INSERT INTO transcript(work_id, generation, message)"
            f" SELECT {int(held.work_id)}, {int(held.generation)}, to_jsonb(repeat('ab', 500000))"
            f" FROM generate_series(1, {int(PARAMS['rows'])})"
        )
        for setup, statement in [(None, rows), *_FILLS]:
            _attempt(connection, setup, statement)
    return _plain_observe(connection, held, message)
