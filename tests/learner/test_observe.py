"""``observe(db, held, message, *, now=None)``: a fenced transcript append;
a refused writer leaves no row."""

from __future__ import annotations

import json
import math

import pytest
from learner_support import T, finish_by_sql, refuses, rows, snapshot


def transcript(db):
    return [
        (r["work_id"], r["generation"], json.loads(r["message"]))
        for r in rows(db, "transcript", "seq")
    ]


def test_the_row_carries_the_writers_generation_and_message(impl, db, held):
    message = {
        "role": "assistant",
        "text": "six vanilla tubs, crème",
        "tools": [1, 2.5, None, True],
    }
    seq = impl.observe(db, held, message, now=T + 1)
    stored = rows(db, "transcript")
    assert len(stored) == 1, f"one observe writes one row, got {len(stored)}"
    assert stored[0]["seq"] == seq, f"observe returns the row's seq ({stored[0]['seq']}), got {seq}"
    assert (stored[0]["work_id"], stored[0]["generation"]) == (held.work_id, 1), (
        f"the row records the work and the writer's generation 1: {stored[0]}"
    )
    assert json.loads(stored[0]["message"]) == message, "the message round-trips as JSON"


@pytest.mark.parametrize(
    "message",
    ["plain text", 42, 0.5, None, [], ["a", {"b": [1]}], True],
    ids=["str", "int", "float", "null", "empty-list", "nested", "bool"],
)
def test_any_json_value_is_a_message(impl, db, held, message):
    impl.observe(db, held, message, now=T + 1)
    assert transcript(db) == [(held.work_id, 1, message)], f"{message!r} round-trips"


def test_messages_keep_their_order(impl, db, held):
    seqs = [impl.observe(db, held, {"n": n}, now=T + n) for n in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5, f"each message gets a later seq: {seqs}"
    assert [m["n"] for _w, _g, m in transcript(db)] == [0, 1, 2, 3, 4]


def test_a_stale_generation_after_takeover_writes_nothing(impl, db, held):
    taken = impl.claim(db, "night", ttl=30, now=T + 31)
    with refuses(PermissionError, "observe with the generation-1 claim after a takeover"):
        impl.observe(db, held, {"stale": True}, now=T + 32)
    assert transcript(db) == [], "a refused writer leaves no transcript row"
    impl.observe(db, taken, {"fresh": True}, now=T + 32)
    assert transcript(db) == [(held.work_id, 2, {"fresh": True})], (
        "the new holder's row carries generation 2"
    )


def test_the_same_owner_reclaiming_does_not_revive_its_old_claim(impl, db, held):
    impl.claim(db, "till", ttl=30, now=T + 31)
    with refuses(PermissionError, "observe with till#1 after till#2 took over"):
        impl.observe(db, held, "late", now=T + 32)
    assert transcript(db) == [], "a refused writer leaves no transcript row"


def test_a_lease_that_expires_exactly_now_writes_nothing(impl, db, held):
    with refuses(PermissionError, f"observe at now == expires ({held.expires})"):
        impl.observe(db, held, "late", now=held.expires)
    assert transcript(db) == [], "a refused writer leaves no transcript row"


def test_the_check_and_the_insert_are_one_transaction(impl, held, rival_at_every_moment):
    rival_at_every_moment("observe").attempt(
        lambda connection: impl.observe(connection, held, "mine", now=T + 1),
        "observe's insert",
    )


def test_an_expired_holder_writes_nothing(impl, db, held):
    with refuses(PermissionError, "observe after the lease expired"):
        impl.observe(db, held, "late", now=T + 31)
    assert transcript(db) == [], "a refused writer leaves no transcript row"


def test_finished_work_takes_no_more_messages(impl, db, held):
    finish_by_sql(db, held.work_id)
    with refuses(PermissionError, "observe on finished work"):
        impl.observe(db, held, "after the end", now=T + 1)
    assert transcript(db) == [], "a refused writer leaves no transcript row"


@pytest.mark.parametrize(
    "message",
    [{1, 2}, object(), math.nan, {"cost": math.inf}, [b"bytes"]],
    ids=["set", "object", "nan", "nested-inf", "bytes"],
)
def test_a_message_that_is_not_json_is_refused_and_writes_nothing(impl, db, held, message):
    before = snapshot(db)
    with refuses(ValueError, f"observe with the message {message!r}"):
        impl.observe(db, held, message, now=T + 1)
    assert snapshot(db) == before, "a refused message writes nothing"
