"""``observe(db, held, message)``: a fenced transcript append at the writer's generation; a
refused writer leaves no row."""

from __future__ import annotations

import json
import math

import pytest
from learner_support import (
    expired_claim,
    finish_by_sql,
    refuses,
    rows,
    snapshot,
    take_over,
)


def transcript(db):
    return [
        (r["work_id"], r["generation"], json.loads(r["message"]))
        for r in rows(db, "transcript", "seq")
    ]


def test_the_row_carries_the_writers_generation_and_message(impl, db, held):
    message = {
        "role": "assistant",
        "text": "six vanilla tubs, crème",
        "tools": [1, 2.5, None, True, {"sku": "vanilla-tub"}],
    }
    assert impl.observe(db, held, message) is None, "observe returns nothing"
    stored = rows(db, "transcript")
    assert len(stored) == 1, f"one observe writes one row, got {len(stored)}"
    assert (stored[0]["work_id"], stored[0]["generation"]) == (held.work_id, 1), (
        f"the row records the work and the writer's generation 1: {stored[0]}"
    )
    assert json.loads(stored[0]["message"]) == message, "the message is stored as its JSON"


def test_messages_keep_their_order(impl, db, held):
    for n in range(5):
        impl.observe(db, held, {"n": n})
    assert [m["n"] for _w, _g, m in transcript(db)] == [0, 1, 2, 3, 4], (
        "each message gets a later seq than the one before"
    )


def test_a_stale_generation_after_takeover_writes_nothing(impl, db, held):
    taken = take_over(impl, db, held)
    with refuses(PermissionError, "observe with the generation-1 claim after a takeover"):
        impl.observe(db, held, {"stale": True})
    assert transcript(db) == [], "a refused writer leaves no transcript row"
    impl.observe(db, taken, {"fresh": True})
    assert transcript(db) == [(held.work_id, 2, {"fresh": True})], (
        "the new holder's row carries generation 2"
    )


def test_the_same_owner_reclaiming_does_not_revive_its_old_claim(impl, db, held):
    take_over(impl, db, held, owner="till")
    with refuses(PermissionError, "observe with till#1 after till#2 took over"):
        impl.observe(db, held, {"text": "late"})
    assert transcript(db) == [], "a refused writer leaves no transcript row"


def test_the_check_and_the_insert_are_one_transaction(impl, held, rival_at_every_moment):
    rival_at_every_moment("observe").attempt(
        lambda connection: impl.observe(connection, held, {"text": "mine"}),
        "observe's insert",
    )


def test_an_expired_holder_writes_nothing(impl, db, add_work):
    add_work()
    late = expired_claim(impl, db)
    with refuses(PermissionError, "observe after the lease expired, nobody having taken over"):
        impl.observe(db, late, {"text": "late"})
    assert transcript(db) == [], "a refused writer leaves no transcript row"


def test_finished_work_takes_no_more_messages(impl, db, held):
    finish_by_sql(db, held.work_id)
    with refuses(PermissionError, "observe on finished work"):
        impl.observe(db, held, {"text": "after the end"})
    assert transcript(db) == [], "a refused writer leaves no transcript row"


@pytest.mark.parametrize(
    "message",
    [{"cost": math.nan}, {"cost": [math.inf]}, {"cost": -math.inf}],
    ids=["nan", "nested-inf", "minus-inf"],
)
def test_a_message_with_a_number_json_cannot_hold_writes_nothing(impl, db, held, message):
    before = snapshot(db)
    with refuses(ValueError, f"observe with the message {message!r}"):
        impl.observe(db, held, message)
    assert snapshot(db) == before, "a refused message writes nothing"
