"""``observe(connection, held, message) -> None``: a fenced transcript append, chapter 13's
signature; a refused writer leaves no row."""

from __future__ import annotations

import math

import pytest
from pg_support import expire, snapshot, table


def test_the_row_carries_the_writers_generation_and_message(pg, conn, held):
    message = {"role": "assistant", "text": "six vanilla tubs, crème", "tools": [1, 2.5, None]}
    assert pg.observe(conn, held, message) is None
    rows = table(conn, "transcript")
    assert [(r["work_id"], r["generation"], r["message"]) for r in rows] == [
        (held.work_id, 1, message)
    ]


def test_a_superseded_writer_is_refused_and_writes_nothing(pg, conn, held):
    expire(conn, held.work_id)
    newer = pg.claim(conn, "till", ttl=30)
    assert newer.generation == 2
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.observe(conn, held, {"role": "assistant", "text": "late"})
    assert snapshot(conn) == before


def test_an_expired_writer_is_refused_and_writes_nothing(pg, conn, held):
    expire(conn, held.work_id)
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.observe(conn, held, {"role": "assistant", "text": "late"})
    assert snapshot(conn) == before


@pytest.mark.parametrize(
    "message", [{"x": math.nan}, {"x": math.inf}, {"x": object()}, {"x": {1, 2}}]
)
def test_a_message_that_is_not_json_is_refused_and_writes_nothing(pg, conn, held, message):
    before = snapshot(conn)
    with pytest.raises((TypeError, ValueError)):
        pg.observe(conn, held, message)
    assert snapshot(conn) == before
