"""``finish(db, held, status, result)``: one fenced outcome row with the result text, and the
work is finished."""

from __future__ import annotations

import pytest
from learner_support import expired_claim, lease, refuses, rows, snapshot, take_over, work


def outcomes(db):
    return [(r["work_id"], r["generation"], r["status"], r["result"]) for r in rows(db, "outcomes")]


@pytest.mark.parametrize("status", ["DONE", "BLOCKED", "CANCELED"])
def test_finishing_writes_one_outcome_and_finishes_the_work(impl, db, held, status):
    result = "Six vanilla tubs ordered: op-1 ACCEPTED."
    assert impl.finish(db, held, status, result) is None, "finish returns nothing"
    assert outcomes(db) == [(held.work_id, 1, status, result)], (
        f"exactly one outcome row at the writer's generation, its result as given: {outcomes(db)}"
    )
    assert work(db, held.work_id)["state"] == "finished", "the work is finished"


def test_finishing_twice_is_refused(impl, db, held):
    impl.finish(db, held, "DONE", "first")
    before = snapshot(db)
    with refuses(PermissionError, "finishing the same claim a second time"):
        impl.finish(db, held, "DONE", "second")
    assert snapshot(db) == before, "a repeated finish changes nothing"
    assert outcomes(db) == [(held.work_id, 1, "DONE", "first")]


def test_a_stale_generation_after_takeover_cannot_finish(impl, db, held):
    taken = take_over(impl, db, held)
    with refuses(PermissionError, "finish with the generation-1 claim after a takeover"):
        impl.finish(db, held, "DONE", "stale")
    assert outcomes(db) == [], "a refused finish writes no outcome"
    assert work(db, held.work_id)["state"] == "running", "the work stays with its new holder"
    assert lease(db, held.work_id)["worker_id"] == taken.worker_id
    impl.finish(db, taken, "DONE", "fresh")
    assert outcomes(db) == [(held.work_id, 2, "DONE", "fresh")], (
        "the current holder finishes at generation 2"
    )


def test_the_same_owner_reclaiming_does_not_revive_its_old_claim(impl, db, held):
    """Only the generation tells till#1 from till#2: same label, same running work, a live
    lease (till#2's). finish() must refuse till#1's completion."""
    again = take_over(impl, db, held, owner="till")
    assert (again.owner, again.generation) == ("till", 2), again
    with refuses(PermissionError, "finish with till#1's claim after till#2 took the work"):
        impl.finish(db, held, "DONE", "stale")
    assert outcomes(db) == [], "finish() accepted generation 1's completion after generation 2"
    assert work(db, held.work_id)["state"] == "running", "the work stays with till#2"


def test_an_expired_holder_cannot_finish(impl, db, add_work):
    add_work()
    late = expired_claim(impl, db)
    before = snapshot(db)
    with refuses(PermissionError, "finish after the lease expired, nobody having taken over"):
        impl.finish(db, late, "DONE", "late")
    assert snapshot(db) == before, "a refused finish changes nothing"
    assert work(db, late.work_id)["state"] == "running"


@pytest.mark.parametrize(
    "status",
    ["FAILED", "done", "", "ACCEPTED"],
    ids=["FAILED", "lower-case", "empty", "an-order-status"],
)
def test_an_unknown_status_is_refused_and_changes_nothing(impl, db, held, status):
    before = snapshot(db)
    with refuses(ValueError, f"finish with status {status!r}"):
        impl.finish(db, held, status, "a result")
    assert snapshot(db) == before, "a refused finish changes nothing"


def test_finished_work_frees_its_session(impl, db, add_work, held):
    add_work("s1")  # the next turn of the same conversation
    assert impl.claim(db, "other", ttl=30) is None, "the session's next turn waits"
    impl.finish(db, held, "DONE", "turn 1 done")
    nxt = impl.claim(db, "other", ttl=30)
    assert nxt is not None and nxt.generation == 1, (
        "after finishing, the session's next turn is claimable"
    )


def test_the_check_and_the_outcome_are_one_transaction(impl, held, rival_at_every_moment):
    rival_at_every_moment("finish").attempt(
        lambda connection: impl.finish(connection, held, "DONE", "finished by till"),
        "finish's outcome",
    )
