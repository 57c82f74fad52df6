"""Exercise 7's helpers, which its test modules import (``from pg_support import ...``):
reading the lease, the work and whole tables back on our own connection, and expiring a lease by
the server's clock.

A module of its own, not the conftest: the name ``conftest`` is shared by every conftest.py and
means whichever pytest loaded last. The fixtures stay in ``conftest.py``.
"""

from __future__ import annotations

from typing import Any


def lease(conn, work_id: int) -> dict[str, Any]:
    """The lease row, with ``left``: seconds until it expires by the server's clock."""
    return conn.execute(
        "SELECT owner, generation, expires,"
        " extract(epoch FROM expires - clock_timestamp())::float AS left"
        " FROM leases WHERE work_id = %s",
        (work_id,),
    ).fetchone()


def state(conn, work_id: int) -> str:
    return conn.execute("SELECT state FROM work WHERE work_id = %s", (work_id,)).fetchone()["state"]


def expire(conn, work_id: int) -> None:
    """Move the lease's expiry one second into the server's past (no waiting, no client clock)."""
    conn.execute(
        "UPDATE leases SET expires = clock_timestamp() - interval '1 second' WHERE work_id = %s",
        (work_id,),
    )


def table(conn, name: str) -> list[dict[str, Any]]:
    return conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()


def snapshot(conn) -> dict[str, list[dict[str, Any]]]:
    return {name: table(conn, name) for name in ("work", "leases", "transcript", "outcomes")}
