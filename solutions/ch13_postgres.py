"""Exercise 7, the reference: leases on a PostgreSQL server, whose clock decides expiry.

The complete twin of ``learner/ch13_postgres.py`` (a test keeps signatures and docstrings in
step). The schema, ``PgClaim`` and the connection helpers are given in
``lucyshop.lab.given.pg_shop``.

The schema, ``pg_shop.SCHEMA`` (its times are the server's, ``timestamptz``):

* ``work(work_id serial, session_id, text, state)``: ``state`` is ``pending``, ``running``
  or ``finished``; ``add_work`` inserts a pending row and returns its ``work_id``.
* ``leases(work_id, owner, generation, expires)``: one row per work item from the moment
  it is queued (``owner`` NULL, ``generation`` 0, ``expires`` the epoch), so a claim always
  updates, and locks, a row that exists. The owner and the generation are two columns here;
  ``PgClaim.worker_id`` joins them as ``owner#generation``.
* ``transcript(seq bigserial, work_id, generation, message jsonb, written)``: one row per
  ``observe``, stamped with the writer's generation; ``written`` defaults to the server's
  ``clock_timestamp()``.
* ``outcomes(work_id, generation, status, result text, written)``: at most one row per
  item (``work_id`` is its key); ``status`` is ``DONE``, ``BLOCKED`` or ``CANCELED``.

The four functions keep chapter 13's signatures and return values: ``observe`` and ``finish``
take no ``now`` (here the server's clock decides), ``finish``'s result is text, and
``assert_current`` returns the lease's expiry (the server's ``timestamptz``).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from lucyshop.lab.given.pg_shop import PgClaim

STATUSES = ("DONE", "BLOCKED", "CANCELED")
MAX_TTL = 3600.0


def claim(connection: Any, owner: str, *, ttl: float = 90) -> PgClaim | None:
    """Take the oldest eligible work item in one statement, or return None.

    Eligible, by the server's clock (``clock_timestamp()``), never the caller's: pending work,
    or running work whose lease has expired. Only the oldest unfinished item of a session is
    eligible, so one conversation never has two turns running at once. The statement locks
    the work and lease rows it takes with ``FOR UPDATE SKIP LOCKED`` (a concurrent claim moves
    on to other work instead of waiting), raises the generation by one, and writes
    ``expires = clock_timestamp() + ttl``. ``connection`` is in autocommit mode; ``owner`` is a
    non-empty label without ``#`` of at most 100 characters; ``ttl`` is finite, above 0 and
    at most 3600 seconds.
    """
    if not isinstance(owner, str) or not owner.strip() or "#" in owner or len(owner) > 100:
        raise ValueError(f"owner must be a non-empty label without '#', at most 100: {owner!r}")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_TTL:
        raise ValueError(f"ttl must be finite, above 0 and at most {MAX_TTL:g} seconds: {ttl!r}")
    row = connection.execute(
        """WITH pick AS (
               -- the oldest eligible item: pending, or running under a lease the server's
               -- clock says has expired; and the oldest unfinished turn of its session
               SELECT w.work_id FROM work w JOIN leases l ON l.work_id = w.work_id
                WHERE (w.state = 'pending'
                       OR (w.state = 'running' AND l.expires <= clock_timestamp()))
                  AND w.work_id = (SELECT min(o.work_id) FROM work o
                                    WHERE o.session_id = w.session_id AND o.state <> 'finished')
                ORDER BY w.work_id LIMIT 1
                FOR UPDATE OF w, l SKIP LOCKED),
           moved AS (
               UPDATE work w SET state = 'running' FROM pick
                WHERE w.work_id = pick.work_id RETURNING w.work_id, w.session_id, w.text)
           UPDATE leases l
              SET owner = %(owner)s, generation = l.generation + 1,
                  expires = clock_timestamp() + make_interval(secs => %(ttl)s)
             FROM moved WHERE l.work_id = moved.work_id
        RETURNING l.work_id, moved.session_id, moved.text, l.owner, l.generation, l.expires""",
        {"owner": owner, "ttl": float(ttl)},
    ).fetchone()
    return None if row is None else PgClaim(**row)


def assert_current(connection: Any, held: PgClaim) -> dt.datetime:
    """Return the lease's expiry if ``held`` is the current holder of its work right now;
    otherwise raise PermissionError.

    The same four comparisons as chapter 13's, with the server's clock for the last: the work is
    running; its lease names ``held``'s owner; at ``held``'s generation; and has not expired
    at ``clock_timestamp()``. Call it inside the transaction whose write it guards: it locks
    the lease row (``FOR SHARE``), so no claim can take the work over before that write
    commits.
    """
    row = connection.execute(
        """SELECT w.state, l.owner, l.generation, l.expires,
                  l.expires > clock_timestamp() AS alive,
                  extract(epoch FROM clock_timestamp() - l.expires) AS overdue
             FROM work w JOIN leases l ON l.work_id = w.work_id
            WHERE w.work_id = %s FOR SHARE OF l""",
        (held.work_id,),
    ).fetchone()
    if row is None:
        raise PermissionError(f"work {held.work_id} does not exist")
    if row["state"] != "running":
        raise PermissionError(f"work {held.work_id} is {row['state']}, not running")
    if row["owner"] != held.owner:
        raise PermissionError(
            f"work {held.work_id} is held by {row['owner']!r}, not {held.owner!r}"
        )
    if row["generation"] != held.generation:
        raise PermissionError(
            f"claim for work {held.work_id} generation {held.generation}"
            f" is superseded by generation {row['generation']}"
        )
    if not row["alive"]:
        raise PermissionError(
            f"the lease of {held.worker_id} on work {held.work_id} expired"
            f" {float(row['overdue']):.3f}s ago by the server's clock"
        )
    return row["expires"]


def observe(connection: Any, held: PgClaim, message: dict[str, Any]) -> None:
    """Append one transcript message for the held work, at the writer's generation.

    One transaction: ``assert_current``, then the insert, so a refused writer leaves no row. The
    message is stored as JSON; one that is not JSON (or holds NaN or infinity) raises
    TypeError or ValueError and writes nothing.
    """
    with connection.transaction():
        assert_current(connection, held)
        connection.execute(
            "INSERT INTO transcript(work_id, generation, message) VALUES (%s, %s, %s)",
            (held.work_id, held.generation, json.dumps(message, allow_nan=False)),
        )


def finish(connection: Any, held: PgClaim, status: str, result: str) -> None:
    """End the held work with its outcome (DONE, BLOCKED or CANCELED) and a result text, fenced.

    One transaction: ``assert_current``, the state move, and the outcome row at the writer's
    generation. A stale or repeated finish is refused and changes nothing.
    """
    if status not in STATUSES:
        raise ValueError(f"status is one of {', '.join(STATUSES)}, not {status!r}")
    with connection.transaction():
        assert_current(connection, held)
        connection.execute("UPDATE work SET state = 'finished' WHERE work_id = %s", (held.work_id,))
        connection.execute(
            "INSERT INTO outcomes(work_id, generation, status, result) VALUES (%s, %s, %s, %s)",
            (held.work_id, held.generation, status, result),
        )
