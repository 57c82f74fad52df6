"""``finish(db, held, status, result, *, now=None)``: one fenced outcome row,
and the work is finished."""

from __future__ import annotations

import json
import math

import pytest
from learner_support import T, lease, refuses, rows, snapshot, work


def outcomes(db):
    return [
        (r["work_id"], r["generation"], r["status"], json.loads(r["result"]))
        for r in rows(db, "outcomes")
    ]


@pytest.mark.parametrize("status", ["DONE", "BLOCKED", "CANCELED"])
def test_finishing_writes_one_outcome_and_finishes_the_work(impl, db, held, status):
    result = {"orders": [["op-1", "ACCEPTED"]], "note": "tubs ordered"}
    impl.finish(db, held, status, result, now=T + 1)
    assert outcomes(db) == [(held.work_id, 1, status, result)], (
        f"exactly one outcome row at the writer's generation with the result: {outcomes(db)}"
    )
    assert work(db, held.work_id)["state"] == "finished", "the work is finished"


def test_finishing_twice_is_refused(impl, db, held):
    impl.finish(db, held, "DONE", {"n": 1}, now=T + 1)
    before = snapshot(db)
    with refuses(PermissionError, "finishing the same claim a second time"):
        impl.finish(db, held, "DONE", {"n": 2}, now=T + 2)
    assert snapshot(db) == before, "a repeated finish changes nothing"
    assert outcomes(db) == [(held.work_id, 1, "DONE", {"n": 1})]


def test_a_stale_generation_after_takeover_cannot_finish(impl, db, held):
    taken = impl.claim(db, "night", ttl=30, now=T + 31)
    with refuses(PermissionError, "finish with the generation-1 claim after a takeover"):
        impl.finish(db, held, "DONE", {"stale": True}, now=T + 32)
    assert outcomes(db) == [], "a refused finish writes no outcome"
    assert work(db, held.work_id)["state"] == "running", "the work stays with its new holder"
    assert lease(db, held.work_id)["worker_id"] == taken.worker_id
    impl.finish(db, taken, "DONE", {"fresh": True}, now=T + 32)
    assert outcomes(db) == [(held.work_id, 2, "DONE", {"fresh": True})], (
        "the current holder finishes at generation 2"
    )


def test_the_same_owner_reclaiming_does_not_revive_its_old_claim(impl, db, held):
    """Only the generation tells till#1 from till#2: same label, same running work, a live
    lease (till#2's). finish() must refuse till#1's completion."""
    again = impl.claim(db, "till", ttl=30, now=T + 31)
    assert (again.owner, again.generation) == ("till", 2), again
    with refuses(PermissionError, "finish with till#1's claim after till#2 took the work"):
        impl.finish(db, held, "DONE", {"stale": True}, now=T + 32)
    assert outcomes(db) == [], "finish() accepted generation 1's completion after generation 2"
    assert work(db, held.work_id)["state"] == "running", "the work stays with till#2"


def test_an_expired_holder_cannot_finish(impl, db, held):
    before = snapshot(db)
    with refuses(PermissionError, "finish after the lease expired"):
        impl.finish(db, held, "DONE", {}, now=T + 31)
    assert snapshot(db) == before, "a refused finish changes nothing"
    assert work(db, held.work_id)["state"] == "running"


@pytest.mark.parametrize(
    "status",
    ["FAILED", "done", "", None, "ACCEPTED"],
    ids=["FAILED", "lower-case", "empty", "none", "an-order-status"],
)
def test_an_unknown_status_is_refused_and_changes_nothing(impl, db, held, status):
    before = snapshot(db)
    with refuses(ValueError, f"finish with status {status!r}"):
        impl.finish(db, held, status, {}, now=T + 1)
    assert snapshot(db) == before, "a refused finish changes nothing"


@pytest.mark.parametrize(
    "result",
    [{1, 2}, object(), math.nan, {"x": [math.inf]}],
    ids=["set", "object", "nan", "nested-inf"],
)
def test_a_result_that_is_not_json_is_refused_and_changes_nothing(impl, db, held, result):
    before = snapshot(db)
    with refuses(ValueError, f"finish with the result {result!r}"):
        impl.finish(db, held, "DONE", result, now=T + 1)
    assert snapshot(db) == before, "a refused finish changes nothing"


def test_finished_work_frees_its_session(impl, db, add_work, held):
    add_work("s1")  # the next turn of the same conversation
    assert impl.claim(db, "other", ttl=30, now=T + 1) is None
    impl.finish(db, held, "DONE", {}, now=T + 2)
    nxt = impl.claim(db, "other", ttl=30, now=T + 3)
    assert nxt is not None and nxt.generation == 1, (
        "after finishing, the session's next turn is claimable"
    )


def test_a_lease_that_expires_exactly_now_finishes_nothing(impl, db, held):
    before = snapshot(db)
    with refuses(PermissionError, f"finish at now == expires ({held.expires})"):
        impl.finish(db, held, "DONE", {"late": True}, now=held.expires)
    assert snapshot(db) == before, "a refused finish changes nothing"


def test_the_check_and_the_outcome_are_one_transaction(impl, held, rival_at_every_moment):
    rival_at_every_moment("finish").attempt(
        lambda connection: impl.finish(connection, held, "DONE", {"by": "till"}, now=T + 1),
        "finish's outcome",
    )
