"""``finish(connection, held, status, result) -> None``: the state move and the outcome (its
result a text, as chapter 13's), fenced, in one transaction."""

from __future__ import annotations

import pytest
from pg_support import expire, snapshot, state, table


@pytest.mark.parametrize("status", ["DONE", "BLOCKED", "CANCELED"])
def test_the_outcome_is_written_at_the_writers_generation(pg, conn, held, status):
    assert pg.finish(conn, held, status, "One order placed.") is None
    outcomes = table(conn, "outcomes")
    assert [(o["work_id"], o["generation"], o["status"], o["result"]) for o in outcomes] == [
        (held.work_id, 1, status, "One order placed.")
    ]
    assert state(conn, held.work_id) == "finished"


def test_a_superseded_finish_is_refused_and_changes_nothing(pg, conn, held):
    expire(conn, held.work_id)
    pg.claim(conn, "rival", ttl=30)
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.finish(conn, held, "DONE", "late, by the stale holder")
    assert snapshot(conn) == before


def test_a_repeated_finish_is_refused_and_changes_nothing(pg, conn, held):
    pg.finish(conn, held, "DONE", "first")
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.finish(conn, held, "DONE", "again")
    assert snapshot(conn) == before


def test_an_expired_finish_is_refused_and_changes_nothing(pg, conn, held):
    expire(conn, held.work_id)
    before = snapshot(conn)
    with pytest.raises(PermissionError):
        pg.finish(conn, held, "DONE", "too late")
    assert snapshot(conn) == before


@pytest.mark.parametrize("status", ["done", "FINISHED", ""])
def test_a_status_outside_the_three_is_refused_and_changes_nothing(pg, conn, held, status):
    before = snapshot(conn)
    with pytest.raises(ValueError):
        pg.finish(conn, held, status, "a result")
    assert snapshot(conn) == before
