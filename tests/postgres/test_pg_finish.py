"""``finish(connection, held, status, result)``: the outcome and the state move, fenced, in one
transaction."""

from __future__ import annotations

import pytest
from pg_support import expire, snapshot, state, table


@pytest.mark.parametrize("status", ["DONE", "BLOCKED", "CANCELED"])
def test_the_outcome_is_written_at_the_writers_generation(pg, conn, held, status):
    pg.finish(conn, held, status, {"orders": 1})
    outcomes = table(conn, "outcomes")
    assert [(o["work_id"], o["generation"], o["status"], o["result"]) for o in outcomes] == [
        (held.work_id, 1, status, {"orders": 1})
    ]
    assert state(conn, held.work_id) == "finished"


def test_a_superseded_finish_is_refused_and_changes_nothing(pg, conn, held):
    expire(conn, held.work_id)
    pg.claim(conn, "rival", ttl=30)
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.finish(conn, held, "DONE", {"by": "stale"})
    assert snapshot(conn) == before


def test_a_repeated_finish_is_refused_and_changes_nothing(pg, conn, held):
    pg.finish(conn, held, "DONE", {"n": 1})
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.finish(conn, held, "DONE", {"n": 2})
    assert snapshot(conn) == before


def test_an_expired_finish_is_refused_and_changes_nothing(pg, conn, held):
    expire(conn, held.work_id)
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.finish(conn, held, "DONE", {})
    assert snapshot(conn) == before


@pytest.mark.parametrize("status, result", [("done", {}), ("FINISHED", {}), ("DONE", float("nan"))])
def test_bad_input_is_refused_and_changes_nothing(pg, conn, held, status, result):
    before = snapshot(conn)
    with pytest.raises(ValueError):
        pg.finish(conn, held, status, result)
    assert snapshot(conn) == before
