"""Exercise 3, remove one fence from a copy: the stale row gets in without it, and not with it."""

from __future__ import annotations

import pytest

EXERCISE = "exercise_3_remove_one_fence"


@pytest.fixture
def result(ran):
    return ran


def test_without_the_fence_a_stale_row_enters_the_transcript(result, read, query):
    part = result["without_fence"]
    assert part["late_write"] == "", "the copy without the fence let the stale write through"
    db = read(part["shop"])
    generations = [
        row["generation"]
        for row in query(
            db, "SELECT generation FROM transcript WHERE work_id = ? ORDER BY seq", part["work_id"]
        )
    ]
    assert generations == [2, 1], "generation 1's row lands after generation 2's"


def test_finish_still_refuses_the_same_stale_claim(result, read, query):
    for part in (result["without_fence"], result["with_fence"]):
        assert part["stale_completion"].startswith("PermissionError")
        db = read(part["shop"])
        assert query(
            db, "SELECT generation, status FROM outcomes WHERE work_id = ?", part["work_id"]
        ) == [{"generation": 2, "status": "DONE"}]


def test_with_the_fence_restored_the_row_is_absent(result, read, query):
    part = result["with_fence"]
    assert part["late_write"].startswith("PermissionError")
    db = read(part["shop"])
    generations = [
        row["generation"]
        for row in query(
            db, "SELECT generation FROM transcript WHERE work_id = ? ORDER BY seq", part["work_id"]
        )
    ]
    assert generations == [2], "the refused write left no row"


def test_observe_without_fence_writes_the_writers_generation_and_nothing_else(
    exercises, tmp_path, query
):
    """The copy keeps the chapter's signature and return: ``(db, held, message) -> None``."""
    leases = exercises.chapter()
    db, queue = leases.open_worker_shop(tmp_path / "shop.db")
    work_id = leases.enqueue(queue, "s-1", "session-a", "hello")
    old = leases.claim(db, "till", ttl=30, now=1_000.0)
    leases.claim(db, "till", ttl=30, now=1_031.0)
    before = query(db, "SELECT * FROM outcomes") + query(db, "SELECT * FROM assignment_leases")
    assert exercises.observe_without_fence(db, old, {"text": "late"}) is None
    rows = query(db, "SELECT work_id, generation, message FROM transcript")
    assert rows == [{"work_id": work_id, "generation": 1, "message": '{"text": "late"}'}]
    assert (
        query(db, "SELECT * FROM outcomes") + query(db, "SELECT * FROM assignment_leases") == before
    )
    with pytest.raises(ValueError):
        exercises.observe_without_fence(db, old, {"x": float("nan")})
    assert len(query(db, "SELECT seq FROM transcript")) == 1, (
        "a message that is not JSON writes nothing"
    )
    db.close()
