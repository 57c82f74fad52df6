"""Hostile: fill the PostgreSQL server's disk, and the trusted side's memory, from exercise 7
(appended to the reference ``ch13_postgres.py``).

- At its first ``claim`` in each worker process (a flag on ``sys``), before claiming (so that
  no lease of its runs out meanwhile), it tries each of these once, then again until refused,
  ``PARAMS["megabytes"]`` MB written or ``PARAMS["seconds"]`` gone since the first began: a
  temporary table of 1 MB rows stored uncompressed (the role once kept ``TEMPORARY`` from
  ``PUBLIC``, and the server's directory grew by 2.8 GB in one test); uncompressible 1 MB
  rows in the shop's own ``work`` table; a sort far larger than memory, which spills to
  temporary files; large objects, which belong to no schema.
- After each ``observe`` (the reference's), it adds ``PARAMS["rows"]`` transcript rows of a
  1 MB JSON string that compresses to almost nothing, for the test to read back on its own
  connection (the trusted pytest once grew to 2.9 GB reading 1,500 of them, and the check ran
  215 s).

The test measures the server's directory and the run's processes, and reads what the
exercise 7 row says.
"""

PARAMS = {}  # the test writes what this file is told here

import sys as _sys
import time as _time

_RANDOM_MB = "SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 31250)"
_FILLS = [  # (a statement first, the statement repeated, the megabytes each writes; None: once)
    (
        (
            "CREATE TEMP TABLE IF NOT EXISTS fill(blob text);"
            " ALTER TABLE fill ALTER blob SET STORAGE EXTERNAL"
        ),
        "INSERT INTO fill SELECT repeat('x', 1000000) FROM generate_series(1, 16)",
        16,
    ),
    (None, f"INSERT INTO work(session_id, text) SELECT 'fill', ({_RANDOM_MB})", 1),
    (
        None,
        (
            "SELECT count(*) FROM (SELECT md5(g::text) || md5(g::text) AS m"
            " FROM generate_series(1, 4000000) g ORDER BY 1) s"
        ),
        None,
    ),
    (None, f"SELECT lo_from_bytea(0, convert_to(({_RANDOM_MB}), 'UTF8'))", 1),
]
_plain_claim, _plain_observe = claim, observe  # noqa: F821 - the reference's


def _attempt(connection, setup, statement, megabytes, until):
    """Run ``statement`` once, then again until refused, the megabytes written or ``until``."""
    written = 0
    try:
        if setup is not None:
            connection.execute(setup)
        while True:
            connection.execute(statement)
            written += megabytes or PARAMS["megabytes"]
            if written >= PARAMS["megabytes"] or _time.monotonic() > until:
                return
    except Exception:  # noqa: BLE001, S110 - refused: on to the next
        pass


def claim(connection, owner, *, ttl=90):
    if not getattr(_sys, "_pg_filled", False):
        _sys._pg_filled = True
        until = _time.monotonic() + PARAMS["seconds"]
        for setup, statement, megabytes in _FILLS:
            _attempt(connection, setup, statement, megabytes, until)
    return _plain_claim(connection, owner, ttl=ttl)


def observe(connection, held, message):
    seq = _plain_observe(connection, held, message)
    connection.execute(
        "INSERT INTO transcript(work_id, generation, message)"
        " SELECT %s, %s, to_jsonb(repeat('ab', 500000)) FROM generate_series(1, %s)",
        (held.work_id, held.generation, PARAMS["rows"]),
    )
    return seq
