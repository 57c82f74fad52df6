"""Exercise 7: your file. Leases on a PostgreSQL server, whose clock decides expiry.

You own this file. Each function below is a stub that raises ``NotStarted``; notebook 13d,
*Beyond one host*, teaches what it must do. Replace the ``raise NotStarted(...)`` line with your
code, keeping the signature and the docstring. Workers on several hosts share one database
server but not one clock: every time here is the server's (``clock_timestamp()``).

Test your work (a real PostgreSQL server is started for the tests and stopped after):

    .venv/bin/python -m pytest spec/postgres --impl learner

``make check`` shows the four as one row, ``exercise 7``: NOT STARTED until all four are
written. Your file runs in a sandbox there, as in these tests: it reaches the server only
through the connection it is passed, as a role that may use that test's tables and nothing
else.

Given, in ``lucyshop.lab.given.pg_shop``: the schema (``SCHEMA``), ``PgClaim``, ``connect``,
``create_shop`` and ``add_work``. Use ``psycopg`` through the connection you are passed.

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
import json  # noqa: F401  (you will need it)
from typing import Any

from lucyshop.lab import NotStarted
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
    raise NotStarted("claim", "13d § One statement claims, on the server's clock")


def assert_current(connection: Any, held: PgClaim) -> dt.datetime:
    """Return the lease's expiry if ``held`` is the current holder of its work right now;
    otherwise raise PermissionError.

    The same four comparisons as chapter 13's, with the server's clock for the last: the work is
    running; its lease names ``held``'s owner; at ``held``'s generation; and has not expired
    at ``clock_timestamp()``. Call it inside the transaction whose write it guards: it locks
    the lease row (``FOR SHARE``), so no claim can take the work over before that write
    commits.
    """
    raise NotStarted("assert_current", "13d § The fence reads the server's clock")


def observe(connection: Any, held: PgClaim, message: dict[str, Any]) -> None:
    """Append one transcript message for the held work, at the writer's generation.

    One transaction: ``assert_current``, then the insert, so a refused writer leaves no row. The
    message is stored as JSON; one that is not JSON (or holds NaN or infinity) raises
    TypeError or ValueError and writes nothing.
    """
    raise NotStarted("observe", "13d § Fenced writes")


def finish(connection: Any, held: PgClaim, status: str, result: str) -> None:
    """End the held work with its outcome (DONE, BLOCKED or CANCELED) and a result text, fenced.

    One transaction: ``assert_current``, the state move, and the outcome row at the writer's
    generation. A stale or repeated finish is refused and changes nothing.
    """
    raise NotStarted("finish", "13d § Fenced writes")
