"""queue: admission by source id, and a state machine that the database itself enforces."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from lucyshop.queue import MAX_ID, MAX_TEXT, WorkQueue, refusal


def work_rows(db) -> list[dict]:
    return [dict(r) for r in db.execute("SELECT * FROM work ORDER BY work_id")]


def test_the_queue_keeps_its_shop_as_store(ch11_shop):
    db, queue = ch11_shop
    assert queue.store is db
    assert queue.store.connection is db


def test_new_work_is_accepted_as_one_pending_row(ch11_shop, work_id_of):
    db, queue = ch11_shop
    assert queue.admit("mail-1", "session-a", "six tubs of vanilla") == "accepted"
    [row] = work_rows(db)
    assert row["work_id"] == work_id_of(queue, "mail-1")
    assert (row["source_id"], row["session_id"], row["text"]) == (
        "mail-1",
        "session-a",
        "six tubs of vanilla",
    )
    assert (row["state"], row["worker_id"]) == ("pending", None)


def test_admit_answers_with_one_of_the_four_plain_words_the_chapter_compares(ch11_shop):
    """Chapter 13's enqueue tests ``admit(...) not in {"accepted", "duplicate"}``: each answer
    is a plain str, equal to its word."""
    _, queue = ch11_shop
    answers = [
        queue.admit("mail-1", "session-a", "six tubs"),
        queue.admit("mail-1", "session-a", "six tubs"),
        queue.admit("mail-1", "session-a", "twelve tubs"),
        queue.admit("", "session-a", "six tubs"),
    ]
    assert answers == ["accepted", "duplicate", "conflict", "refused"]
    assert all(type(answer) is str for answer in answers)


def test_the_same_source_and_content_again_is_a_duplicate_of_the_same_work(ch11_shop, work_id_of):
    db, queue = ch11_shop
    assert queue.admit("mail-1", "session-a", "six tubs of vanilla") == "accepted"
    first = work_rows(db)
    assert queue.admit("mail-1", "session-a", "six tubs of vanilla") == "duplicate"
    assert work_rows(db) == first
    assert work_id_of(queue, "mail-1") == first[0]["work_id"]


@pytest.mark.parametrize(
    "session_id, text",
    [
        ("session-a", "twelve tubs of vanilla"),
        ("session-b", "six tubs of vanilla"),
    ],
)
def test_the_same_source_with_other_content_is_a_conflict_and_writes_nothing(
    ch11_shop, session_id, text
):
    db, queue = ch11_shop
    queue.admit("mail-1", "session-a", "six tubs of vanilla")
    before = work_rows(db)
    assert queue.admit("mail-1", session_id, text) == "conflict"
    assert work_rows(db) == before


@pytest.mark.parametrize(
    "source_id, session_id, text",
    [
        ("", "session-a", "text"),
        ("   ", "session-a", "text"),
        ("mail-1", "\t\n", "text"),
        ("mail-1", "session-a", ""),
        ("mail-1", "session-a", "  "),
        (None, "session-a", "text"),
        ("mail-1", 7, "text"),
        ("mail-1", "session-a", b"bytes"),
        ("x" * (MAX_ID + 1), "session-a", "text"),
        ("mail-1", "s" * (MAX_ID + 1), "text"),
        ("mail-1", "session-a", "t" * (MAX_TEXT + 1)),
    ],
)
def test_invalid_work_is_refused_and_writes_nothing(ch11_shop, source_id, session_id, text):
    db, queue = ch11_shop
    queue.admit("mail-0", "session-a", "already here")
    before = work_rows(db)
    assert queue.admit(source_id, session_id, text) == "refused"
    assert refusal(source_id, session_id, text), "the refusal says why"
    assert work_rows(db) == before


def test_work_at_the_length_limits_is_accepted(ch11_shop):
    db, queue = ch11_shop
    assert queue.admit("x" * MAX_ID, "s" * MAX_ID, "t" * MAX_TEXT) == "accepted"
    assert refusal("x" * MAX_ID, "s" * MAX_ID, "t" * MAX_TEXT) == ""
    assert len(work_rows(db)) == 1


def test_a_full_queue_refuses_new_work_and_finished_work_frees_a_place(ch11_shop, work_id_of):
    db, _ = ch11_shop
    queue = WorkQueue(db, capacity=2)
    queue.admit("mail-1", "s", "one")
    queue.admit("mail-2", "s", "two")
    before = work_rows(db)
    assert queue.admit("mail-3", "s", "three") == "refused"
    assert refusal("mail-3", "s", "three") == "", "refused for the queue, not for its input"
    assert work_rows(db) == before
    # A retried delivery of admitted work is still recognised when the queue is full.
    assert queue.admit("mail-1", "s", "one") == "duplicate"
    first = work_id_of(queue, "mail-1")
    db.execute("UPDATE work SET state = 'running' WHERE work_id = ?", (first,))
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (first,))
    assert queue.admit("mail-3", "s", "three") == "accepted"
    assert len(work_rows(db)) == 3


def test_the_same_source_id_cannot_be_inserted_twice_even_by_raw_sql(ch11_shop):
    db, queue = ch11_shop
    queue.admit("mail-1", "s", "one")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO work(source_id, session_id, text, created) VALUES ('mail-1', 's', 'x', 0)"
        )
    assert len(work_rows(db)) == 1


@pytest.fixture
def work_in(ch11_shop, work_id_of) -> Callable[[str], int]:
    """``work_in(state) -> work_id``: new work moved to ``state`` by its legal steps."""
    db, queue = ch11_shop

    def make(state: str) -> int:
        assert queue.admit(f"mail-{state}", "s", "text") == "accepted"
        work_id = work_id_of(queue, f"mail-{state}")
        moves = {"pending": [], "running": ["running"], "finished": ["running", "finished"]}
        for step in moves[state]:
            db.execute("UPDATE work SET state = ? WHERE work_id = ?", (step, work_id))
        return work_id

    return make


@pytest.mark.parametrize(
    "start, target",
    [
        ("pending", "finished"),
        ("running", "pending"),
        ("finished", "running"),
        ("finished", "pending"),
    ],
)
def test_the_database_refuses_an_illegal_state_move(ch11_shop, start, target, work_in):
    db, queue = ch11_shop
    work_id = work_in(start)
    before = queue.get(work_id)
    with pytest.raises(sqlite3.IntegrityError, match="pending -> running -> finished|final"):
        db.execute("UPDATE work SET state = ? WHERE work_id = ?", (target, work_id))
    assert queue.get(work_id) == before


def test_finished_work_is_final_even_for_other_columns(ch11_shop, work_in):
    db, queue = ch11_shop
    work_id = work_in("finished")
    before = queue.get(work_id)
    with pytest.raises(sqlite3.IntegrityError, match="final"):
        db.execute("UPDATE work SET worker_id = 'thief' WHERE work_id = ?", (work_id,))
    assert queue.get(work_id) == before


def test_the_legal_moves_are_allowed_and_running_work_may_change_worker(ch11_shop, work_in):
    db, queue = ch11_shop
    work_id = work_in("pending")
    db.execute("UPDATE work SET state = 'running', worker_id = 'w#1' WHERE work_id = ?", (work_id,))
    db.execute("UPDATE work SET state = 'running', worker_id = 'w#2' WHERE work_id = ?", (work_id,))
    assert (queue.get(work_id)["state"], queue.get(work_id)["worker_id"]) == ("running", "w#2")
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (work_id,))
    assert queue.get(work_id)["state"] == "finished"


def test_a_state_outside_the_three_is_refused(ch11_shop, work_in):
    db, queue = ch11_shop
    work_id = work_in("pending")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("UPDATE work SET state = 'paused' WHERE work_id = ?", (work_id,))
    assert queue.get(work_id)["state"] == "pending"


def test_counts_report_every_state_including_empty_ones(ch11_shop, work_in):
    _, queue = ch11_shop
    assert queue.counts() == {"pending": 0, "running": 0, "finished": 0}
    work_in("pending")
    work_in("running")
    work_in("finished")
    queue.admit("mail-extra", "s", "another")
    assert queue.counts() == {"pending": 2, "running": 1, "finished": 1}


def test_get_returns_the_row_or_none(ch11_shop, work_id_of):
    db, queue = ch11_shop
    queue.admit("mail-1", "session-a", "text")
    work_id = work_id_of(queue, "mail-1")
    row = queue.get(work_id)
    assert row == work_rows(db)[0]
    assert (row["source_id"], row["state"]) == ("mail-1", "pending")
    assert queue.get(work_id + 1) is None
