"""``enqueue(queue, source_id, session_id, text)``: admit one assignment, return its work id.

Arrives written in the learner's file (the chapter gives it); its row stays so that a learner
who breaks it is told."""

from __future__ import annotations

import pytest
from learner_support import refuses, rows, work

from lucyshop.queue import DEFAULT_CAPACITY


@pytest.fixture
def queue(worker_shop):
    """The queue of the file's own shop, in the sandbox (only its methods cross back)."""
    return worker_shop[1]


def test_enqueue_returns_the_new_work_id(impl, db, queue):
    first = impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    second = impl.enqueue(queue, "order-2", "s1", "two oat milks")
    assert isinstance(first, int) and isinstance(second, int) and first != second, (
        f"each assignment gets its own work id, got {first!r} and {second!r}"
    )
    row = work(db, first)
    assert (row["source_id"], row["session_id"], row["text"], row["state"]) == (
        "order-1",
        "s1",
        "six vanilla tubs",
        "pending",
    ), f"the work row holds what was admitted, pending: {row}"


def test_a_retried_delivery_returns_the_same_id(impl, db, queue):
    first = impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    again = impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    assert again == first, f"the same delivery twice is one work item ({first}), got {again}"
    assert len(rows(db, "work")) == 1, "a retried delivery writes no second row"


def test_a_conflicting_delivery_is_refused(impl, db, queue):
    impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    with refuses(ValueError, "the same source id with other text"):
        impl.enqueue(queue, "order-1", "s1", "sixty vanilla tubs")
    assert [r["text"] for r in rows(db, "work")] == ["six vanilla tubs"], (
        "a conflict leaves the original work as it was and adds nothing"
    )


@pytest.mark.parametrize(
    ("source", "session", "text"),
    [
        ("", "s1", "hi"),
        ("order-1", " ", "hi"),
        ("order-1", "s1", ""),
        ("order-1", "s1", "x" * 4001),
    ],
    ids=["empty-source", "blank-session", "empty-text", "too-long"],
)
def test_a_refused_admission_raises_and_writes_nothing(impl, db, queue, source, session, text):
    with refuses(ValueError, f"enqueue(queue, {source!r}, {session!r}, {text[:10]!r}...)"):
        impl.enqueue(queue, source, session, text)
    assert rows(db, "work") == [], "a refused admission writes nothing"


def test_a_full_queue_is_refused(impl, db, queue):
    with db.immediate():  # the queue's capacity, 10,000 open items, by SQL in one transaction
        db.executemany(
            "INSERT INTO work(source_id, session_id, text, created) VALUES (?, 's1', 'one', 0)",
            [(f"bulk-{n}",) for n in range(DEFAULT_CAPACITY)],
        )
    with refuses(ValueError, "enqueue into a full queue"):
        impl.enqueue(queue, "order-1", "s1", "one more")
    assert len(rows(db, "work")) == DEFAULT_CAPACITY, "a refused admission writes nothing"
