"""Hostile: ask the trusted side for an answer of a gigabyte (appended to the reference).

``observe``, handed the served stand-in, first selects ``PARAMS["rows"]`` rows of
``PARAMS["megabytes"]`` MB each, made on the fly (no table holds them), and then writes as
the reference does. Each value is within the stand-in's size for one value and the rows are
within its row count, so the trusted side once fetched them all: its pytest grew to 2.9 GB,
and the refusal that followed blamed this worker for the frame (issue 47). The trusted side
must stop at a few MiB counted as it fetches, stay under 1 GiB, and say that the answer was
its own.
"""

PARAMS = {}  # the test writes what this file is told here

_plain_observe = observe  # noqa: F821 - the reference's
_HUGE = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
    " SELECT i, zeroblob(?) FROM n"
)


def observe(db, held, message):
    if type(db).__module__.endswith("shop_probes"):  # the served stand-in
        db.execute(_HUGE, (PARAMS["rows"], PARAMS["megabytes"] * 1_000_000)).fetchall()
    return _plain_observe(db, held, message)
