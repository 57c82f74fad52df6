"""queue: admission by source id, and a state machine that the database itself enforces."""

from __future__ import annotations

import sqlite3

import pytest

from lucyshop.queue import MAX_ID, MAX_TEXT, WorkQueue


def work_rows(db) -> list[dict]:
    return [dict(r) for r in db.execute("SELECT * FROM work ORDER BY work_id")]


def test_new_work_is_accepted_as_one_pending_row(ch11_shop):
    db, queue = ch11_shop
    admission = queue.admit("mail-1", "session-a", "six tubs of vanilla")
    assert admission.status == "accepted"
    [row] = work_rows(db)
    assert row["work_id"] == admission.work_id
    assert (row["source_id"], row["session_id"], row["text"]) == (
        "mail-1",
        "session-a",
        "six tubs of vanilla",
    )
    assert (row["state"], row["worker_id"]) == ("pending", None)


def test_the_same_source_and_content_again_is_a_duplicate_of_the_same_work(ch11_shop):
    db, queue = ch11_shop
    first = queue.admit("mail-1", "session-a", "six tubs of vanilla")
    again = queue.admit("mail-1", "session-a", "six tubs of vanilla")
    assert again.status == "duplicate"
    assert again.work_id == first.work_id
    assert len(work_rows(db)) == 1


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
    first = queue.admit("mail-1", "session-a", "six tubs of vanilla")
    before = work_rows(db)
    conflict = queue.admit("mail-1", session_id, text)
    assert conflict.status == "conflict"
    assert conflict.reason
    assert work_rows(db) == before
    assert before[0]["work_id"] == first.work_id


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
    admission = queue.admit(source_id, session_id, text)
    assert admission.status == "refused"
    assert admission.work_id is None
    assert admission.reason
    assert work_rows(db) == before


def test_work_at_the_length_limits_is_accepted(ch11_shop):
    db, queue = ch11_shop
    admission = queue.admit("x" * MAX_ID, "s" * MAX_ID, "t" * MAX_TEXT)
    assert admission.status == "accepted"
    assert len(work_rows(db)) == 1


def test_a_full_queue_refuses_new_work_and_finished_work_frees_a_place(ch11_shop):
    db, _ = ch11_shop
    queue = WorkQueue(db, capacity=2)
    first = queue.admit("mail-1", "s", "one")
    queue.admit("mail-2", "s", "two")
    before = work_rows(db)
    full = queue.admit("mail-3", "s", "three")
    assert full.status == "refused"
    assert "capacity" in full.reason
    assert work_rows(db) == before
    # A retried delivery of admitted work is still recognised when the queue is full.
    assert queue.admit("mail-1", "s", "one").status == "duplicate"
    db.execute("UPDATE work SET state = 'running' WHERE work_id = ?", (first.work_id,))
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (first.work_id,))
    assert queue.admit("mail-3", "s", "three").status == "accepted"
    assert len(work_rows(db)) == 3


def test_the_same_source_id_cannot_be_inserted_twice_even_by_raw_sql(ch11_shop):
    db, queue = ch11_shop
    queue.admit("mail-1", "s", "one")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO work(source_id, session_id, text, created) VALUES ('mail-1', 's', 'x', 0)"
        )
    assert len(work_rows(db)) == 1


def work_in(db, queue, state: str) -> int:
    work_id = queue.admit(f"mail-{state}", "s", "text").work_id
    moves = {"pending": [], "running": ["running"], "finished": ["running", "finished"]}
    for step in moves[state]:
        db.execute("UPDATE work SET state = ? WHERE work_id = ?", (step, work_id))
    return work_id


@pytest.mark.parametrize(
    "start, target",
    [
        ("pending", "finished"),
        ("running", "pending"),
        ("finished", "running"),
        ("finished", "pending"),
    ],
)
def test_the_database_refuses_an_illegal_state_move(ch11_shop, start, target):
    db, queue = ch11_shop
    work_id = work_in(db, queue, start)
    before = queue.get(work_id)
    with pytest.raises(sqlite3.IntegrityError, match="pending -> running -> finished|final"):
        db.execute("UPDATE work SET state = ? WHERE work_id = ?", (target, work_id))
    assert queue.get(work_id) == before


def test_finished_work_is_final_even_for_other_columns(ch11_shop):
    db, queue = ch11_shop
    work_id = work_in(db, queue, "finished")
    before = queue.get(work_id)
    with pytest.raises(sqlite3.IntegrityError, match="final"):
        db.execute("UPDATE work SET worker_id = 'thief' WHERE work_id = ?", (work_id,))
    assert queue.get(work_id) == before


def test_the_legal_moves_are_allowed_and_running_work_may_change_worker(ch11_shop):
    db, queue = ch11_shop
    work_id = work_in(db, queue, "pending")
    db.execute("UPDATE work SET state = 'running', worker_id = 'w#1' WHERE work_id = ?", (work_id,))
    db.execute("UPDATE work SET state = 'running', worker_id = 'w#2' WHERE work_id = ?", (work_id,))
    assert (queue.get(work_id)["state"], queue.get(work_id)["worker_id"]) == ("running", "w#2")
    db.execute("UPDATE work SET state = 'finished' WHERE work_id = ?", (work_id,))
    assert queue.get(work_id)["state"] == "finished"


def test_a_state_outside_the_three_is_refused(ch11_shop):
    db, queue = ch11_shop
    work_id = work_in(db, queue, "pending")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("UPDATE work SET state = 'paused' WHERE work_id = ?", (work_id,))
    assert queue.get(work_id)["state"] == "pending"


def test_counts_report_every_state_including_empty_ones(ch11_shop):
    db, queue = ch11_shop
    assert queue.counts() == {"pending": 0, "running": 0, "finished": 0}
    work_in(db, queue, "pending")
    work_in(db, queue, "running")
    work_in(db, queue, "finished")
    queue.admit("mail-extra", "s", "another")
    assert queue.counts() == {"pending": 2, "running": 1, "finished": 1}


def test_get_returns_the_row_or_none(ch11_shop):
    db, queue = ch11_shop
    work_id = queue.admit("mail-1", "session-a", "text").work_id
    row = queue.get(work_id)
    assert row == work_rows(db)[0]
    assert (row["source_id"], row["state"]) == ("mail-1", "pending")
    assert queue.get(work_id + 1) is None
