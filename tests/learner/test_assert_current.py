"""``assert_current(connection, held, now=None)``: four conditions, each enough to refuse."""

from __future__ import annotations

import dataclasses
import time

from learner_support import T, finish_by_sql, refuses, snapshot


def test_the_current_holder_passes(impl, db, held):
    before = snapshot(db)
    assert impl.assert_current(db, held, T + 1) is None, "the current holder passes (returns None)"
    assert impl.assert_current(db, held, T + 29.9) is None, (
        "with 0.1s of lease left it still passes"
    )
    assert snapshot(db) == before, "the holder check writes nothing"


def test_finished_work_is_refused(impl, db, held):
    finish_by_sql(db, held.work_id)  # only the state changes: same worker, lease and generation
    with refuses(PermissionError, "assert_current on finished work"):
        impl.assert_current(db, held, T + 1)


def test_another_owner_at_the_same_generation_is_refused(impl, db, held):
    forged = dataclasses.replace(held, owner="mallory")  # generation 1, same work, live lease
    with refuses(PermissionError, "a claim by another owner at the current generation"):
        impl.assert_current(db, forged, T + 1)


def test_an_older_generation_of_the_same_owner_is_refused(impl, db, held):
    again = impl.claim(db, "till", ttl=30, now=T + 31)  # same label takes over: generation 2
    assert again.generation == 2, (
        f"the same owner taking over expired work is generation 2, got {again}"
    )
    with refuses(PermissionError, "the generation-1 claim after the takeover at generation 2"):
        impl.assert_current(db, held, T + 32)
    assert impl.assert_current(db, again, T + 32) is None, "the new generation passes"


def test_the_lease_generation_column_alone_refuses(impl, db, held):
    # worker_id still says till#1 everywhere; only the generation column moved on.
    db.execute("UPDATE assignment_leases SET generation = 2 WHERE work_id = ?", (held.work_id,))
    with refuses(PermissionError, "a claim at generation 1 when the lease row says generation 2"):
        impl.assert_current(db, held, T + 1)


def test_an_expired_lease_is_refused_even_if_nobody_took_over(impl, db, held):
    with refuses(PermissionError, "the holder 1s after its lease expired"):
        impl.assert_current(db, held, T + 31)
    with refuses(PermissionError, "the holder an hour after its lease expired"):
        impl.assert_current(db, held, T + 3600)


def test_a_lease_that_expires_exactly_now_no_longer_authorises(impl, db, held):
    with refuses(PermissionError, f"the holder at now == expires ({held.expires})"):
        impl.assert_current(db, held, held.expires)


def test_the_clock_defaults_to_now(impl, db, add_work):
    add_work()
    past = impl.claim(db, "till", ttl=30, now=time.time() - 100)  # expired 70s ago
    with refuses(PermissionError, "assert_current without now= on a lease that expired 70s ago"):
        impl.assert_current(db, past)
    add_work("s2")
    live = impl.claim(db, "till", ttl=30)
    assert impl.assert_current(db, live) is None, "a lease taken just now is current"


def test_unknown_work_is_refused(impl, db, held):
    ghost = dataclasses.replace(held, work_id=held.work_id + 99)
    with refuses(PermissionError, "a claim on work that does not exist"):
        impl.assert_current(db, ghost, T + 1)


def test_pending_work_is_refused(impl, db, add_work, held):
    pending = add_work("s2")
    forged = dataclasses.replace(held, work_id=pending)
    with refuses(PermissionError, "a claim on work nobody has claimed"):
        impl.assert_current(db, forged, T + 1)
