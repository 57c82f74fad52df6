"""``assert_current(connection, held, now=None) -> float``: the lease's expiry for the current
holder; four comparisons, each enough to refuse."""

from __future__ import annotations

import dataclasses

import pytest
from learner_support import expired_claim, finish_by_sql, refuses, snapshot


def test_the_current_holder_passes_and_gets_its_expiry(impl, db, held):
    before = snapshot(db)
    for now in (held.expires - 29, held.expires - 0.1):
        assert impl.assert_current(db, held, now) == pytest.approx(held.expires), (
            f"the current holder at now={now} passes, returning its lease's expiry ({held.expires})"
        )
    assert snapshot(db) == before, "the holder check writes nothing"


def test_finished_work_is_refused(impl, db, held):
    finish_by_sql(db, held.work_id)  # only the state changes: same worker, lease and generation
    with refuses(PermissionError, "assert_current on finished work"):
        impl.assert_current(db, held, held.expires - 29)


def test_another_owner_at_the_same_generation_is_refused(impl, db, held):
    forged = dataclasses.replace(held, owner="mallory")  # generation 1, same work, live lease
    with refuses(PermissionError, "a claim by another owner at the current generation"):
        impl.assert_current(db, forged, held.expires - 29)


def test_an_older_generation_of_the_same_owner_is_refused(impl, db, held):
    again = impl.claim(db, "till", ttl=30, now=held.expires + 1)  # the same label takes over
    assert again.generation == 2, (
        f"the same owner taking over expired work is generation 2, got {again}"
    )
    with refuses(PermissionError, "the generation-1 claim after the takeover at generation 2"):
        impl.assert_current(db, held, held.expires + 2)
    assert impl.assert_current(db, again, held.expires + 2) == pytest.approx(again.expires), (
        "the new generation passes"
    )


def test_the_lease_generation_column_alone_refuses(impl, db, held):
    # worker_id still says till#1 everywhere; only the generation column moved on.
    db.execute("UPDATE assignment_leases SET generation = 2 WHERE work_id = ?", (held.work_id,))
    with refuses(PermissionError, "a claim at generation 1 when the lease row says generation 2"):
        impl.assert_current(db, held, held.expires - 29)


def test_an_expired_lease_is_refused_even_if_nobody_took_over(impl, db, held):
    with refuses(PermissionError, "the holder 1s after its lease expired"):
        impl.assert_current(db, held, held.expires + 1)
    with refuses(PermissionError, "the holder an hour after its lease expired"):
        impl.assert_current(db, held, held.expires + 3600)


def test_a_lease_that_expires_exactly_now_no_longer_authorises(impl, db, held):
    with refuses(PermissionError, f"the holder at now == expires ({held.expires})"):
        impl.assert_current(db, held, held.expires)


def test_the_clock_defaults_to_now(impl, db, add_work, held):
    assert impl.assert_current(db, held) == pytest.approx(held.expires), (
        "a lease taken just now is current at the real clock"
    )
    add_work("s2")
    past = expired_claim(impl, db)  # its lease ran out 30 s ago
    with refuses(PermissionError, "assert_current without now on a lease that expired 30 s ago"):
        impl.assert_current(db, past)


def test_unknown_work_is_refused(impl, db, held):
    ghost = dataclasses.replace(held, work_id=held.work_id + 99)
    with refuses(PermissionError, "a claim on work that does not exist"):
        impl.assert_current(db, ghost, held.expires - 29)


def test_pending_work_is_refused(impl, db, add_work, held):
    pending = add_work("s2")
    forged = dataclasses.replace(held, work_id=pending)
    with refuses(PermissionError, "a claim on work nobody has claimed"):
        impl.assert_current(db, forged, held.expires - 29)
