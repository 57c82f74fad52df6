"""``enqueue(queue, source_id, session_id, text)``: admit one assignment, return its work id."""

from __future__ import annotations

import pytest
from learner_support import refuses, rows

from lucyshop.approval import open_shop


@pytest.fixture
def queue(tmp_path):
    """Chapter 11's shop is enough: enqueue only admits work."""
    db, queue = open_shop(tmp_path / "shop.db")
    yield queue
    db.close()


def test_enqueue_returns_the_new_work_id(impl, queue):
    first = impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    second = impl.enqueue(queue, "order-2", "s1", "two oat milks")
    assert isinstance(first, int) and isinstance(second, int) and first != second, (
        f"each assignment gets its own work id, got {first!r} and {second!r}"
    )
    row = queue.get(first)
    assert (row["source_id"], row["session_id"], row["text"], row["state"]) == (
        "order-1",
        "s1",
        "six vanilla tubs",
        "pending",
    ), f"the work row holds what was admitted, pending: {row}"


def test_a_retried_delivery_returns_the_same_id(impl, queue):
    first = impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    again = impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    assert again == first, f"the same delivery twice is one work item ({first}), got {again}"
    assert len(rows(queue.db, "work")) == 1, "a retried delivery writes no second row"


def test_a_conflicting_delivery_is_refused(impl, queue):
    impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    with refuses(ValueError, "the same source id with other text"):
        impl.enqueue(queue, "order-1", "s1", "sixty vanilla tubs")
    assert [r["text"] for r in rows(queue.db, "work")] == ["six vanilla tubs"], (
        "a conflict leaves the original work as it was and adds nothing"
    )


def test_the_queues_reason_is_in_the_error(impl, queue):
    impl.enqueue(queue, "order-1", "s1", "six vanilla tubs")
    with pytest.raises(ValueError, match="source id already holds other work"):
        impl.enqueue(queue, "order-1", "s2", "six vanilla tubs")


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
def test_a_refused_admission_raises_and_writes_nothing(impl, queue, source, session, text):
    with refuses(ValueError, f"enqueue(queue, {source!r}, {session!r}, {text[:10]!r}...)"):
        impl.enqueue(queue, source, session, text)
    assert rows(queue.db, "work") == [], "a refused admission writes nothing"


def test_a_full_queue_is_refused(impl, queue):
    queue.capacity = 1
    impl.enqueue(queue, "order-1", "s1", "one")
    with pytest.raises(ValueError, match="capacity"):  # the queue's reason
        impl.enqueue(queue, "order-2", "s1", "two")
    assert len(rows(queue.db, "work")) == 1
