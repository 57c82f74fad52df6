"""``claim(connection, owner, *, ttl=90)``: one statement, the server's clock, SKIP LOCKED."""

from __future__ import annotations

import math

import pytest
from pg_support import expire, lease, snapshot, state

from lucyshop.lab.given import pg_shop


def test_the_oldest_pending_work_is_taken_at_generation_one(pg, conn, add_work):
    first, _second = add_work("s1"), add_work("s2")
    held = pg.claim(conn, "till", ttl=30)
    assert (held.work_id, held.owner, held.generation) == (first, "till", 1), held
    row = lease(conn, first)
    assert (row["owner"], row["generation"]) == ("till", 1), f"the lease row: {row}"
    assert 25 < row["left"] <= 30, f"the lease ends ttl=30 s from the server's now: {row['left']}"
    assert held.expires == row["expires"], "the claim returns the expiry the server wrote"
    assert state(conn, first) == "running"


def test_nothing_eligible_returns_none_and_changes_nothing(pg, conn, add_work):
    add_work("s1")
    pg.claim(conn, "till", ttl=30)
    before = snapshot(conn)
    assert pg.claim(conn, "rival", ttl=30) is None, "a live lease is not taken"
    assert snapshot(conn) == before


def test_an_expired_lease_is_taken_at_the_next_generation(pg, conn, add_work):
    work_id = add_work()
    pg.claim(conn, "till", ttl=30)
    expire(conn, work_id)
    again = pg.claim(conn, "rival", ttl=30)
    assert (again.work_id, again.owner, again.generation) == (work_id, "rival", 2), again
    assert lease(conn, work_id)["generation"] == 2


def test_a_session_runs_one_turn_at_a_time(pg, conn, add_work):
    first, second = add_work("s1"), add_work("s1")
    assert pg.claim(conn, "till", ttl=30).work_id == first
    assert pg.claim(conn, "rival", ttl=30) is None, "the session's second turn waits"
    conn.execute("UPDATE work SET state = 'finished' WHERE work_id = %s", (first,))
    assert pg.claim(conn, "rival", ttl=30).work_id == second


def test_a_worker_clock_ahead_does_not_lengthen_the_lease(shifted, conn, add_work):
    """A client-clock lease written by a host 10 minutes ahead would end 10 minutes late."""
    work_id = add_work()
    ahead = shifted(+600)
    held = ahead.pg.claim(ahead.conn, "till", ttl=30)
    assert held is not None and held.generation == 1, held
    left = lease(conn, work_id)["left"]
    assert 20 < left <= 30, f"the lease must end 30 s from the server's now, not {left:.0f} s"


def test_a_worker_clock_behind_still_takes_an_expired_lease(pg, shifted, conn, add_work):
    """A host 10 minutes behind would think the lease had 10 minutes left."""
    work_id = add_work()
    pg.claim(conn, "till", ttl=30)
    expire(conn, work_id)
    behind = shifted(-600)
    held = behind.pg.claim(behind.conn, "rival", ttl=30)
    seen = None if held is None else held.generation
    assert seen == 2, f"the server says the lease expired: the claim returned {held}"
    assert lease(conn, work_id)["generation"] == 2


def test_a_locked_item_is_skipped_not_waited_for(pg, worker, dsn, conn, add_work):
    first, second = add_work("s1"), add_work("s2")
    with pg_shop.connect(dsn) as other, other.transaction():
        other.execute("SELECT * FROM work WHERE work_id = %s FOR UPDATE", (first,))
        worker.execute(conn, "SET lock_timeout = '3s'")  # a claim that waits for it fails
        held = pg.claim(conn, "till", ttl=30)
    assert held is not None and held.work_id == second, (
        f"with work {first} locked by another transaction, claim takes {second}: {held}"
    )


def test_concurrent_claims_take_each_item_once(pg, pg_box, worker, role, conn, add_work):
    """Six workers, each on a connection and a thread of its own in the sandbox, claim until
    nothing is left: the database must show every item taken once, at generation 1."""
    items = {add_work(f"s{n}") for n in range(24)}
    raced = worker.race(pg.claim, pg_box.dsn(role), [f"w{n}" for n in range(6)], 30)
    assert not raced["errors"], raced["errors"]
    leases = snapshot(conn)["leases"]
    assert [r["generation"] for r in leases] == [1] * len(items), "every item claimed once"
    assert {r["work_id"] for r in leases if r["owner"]} == items
    assert all(state(conn, work_id) == "running" for work_id in items)
    taken = raced["taken"]
    assert sorted(w for _, w, _ in taken) == sorted(items), "each claim returned its own item"
    assert {(o, w) for o, w, _ in taken} == {(r["owner"], r["work_id"]) for r in leases}


@pytest.mark.parametrize(
    "owner, ttl",
    [
        ("", 30),
        ("a#b", 30),
        ("x" * 101, 30),
        (None, 30),
        ("till", 0),
        ("till", -1),
        ("till", math.nan),
        ("till", math.inf),
        ("till", 3601),
        ("till", True),
        ("till", "30"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(pg, conn, add_work, owner, ttl):
    add_work()
    before = snapshot(conn)
    with pytest.raises(ValueError):
        pg.claim(conn, owner, ttl=ttl)
    assert snapshot(conn) == before
