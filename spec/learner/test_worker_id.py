"""``Claim.worker_id`` is ``owner#generation``: chapter 11's holder check then fences by
generation.

``Claim`` arrives written in the learner's file (the chapter gives it); the row stays so that a
learner who breaks it is told, and needs no function the learner writes."""

from __future__ import annotations

import pytest
from learner_support import refuses

from lucyshop.approval import require_holder


def test_worker_id_is_owner_hash_generation(impl):
    held = impl.Claim(3, "s1", "hello", "till-1", 2, 100.0)
    assert held.worker_id == "till-1#2", (
        f"Claim(owner='till-1', generation=2).worker_id, got {held.worker_id!r}"
    )


@pytest.mark.parametrize(("owner", "generation"), [("a", 1), ("night-worker", 12), ("w7", 1000)])
def test_worker_id_names_the_execution(impl, owner, generation):
    held = impl.Claim(1, "s1", "t", owner, generation, 0.0)
    assert held.worker_id == f"{owner}#{generation}", f"got {held.worker_id!r}"


def test_the_same_owner_at_another_generation_is_another_worker(impl):
    first = impl.Claim(1, "s1", "t", "till", 1, 0.0)
    second = impl.Claim(1, "s1", "t", "till", 2, 0.0)
    assert first.worker_id != second.worker_id, (
        "a reused owner label must not name the old execution"
    )


def test_chapter_11_holder_check_fences_an_old_generation(impl, worker_shop, add_work):
    """The records after the same label took expired work over (till#2, written here by SQL,
    so this row needs no ``claim``): chapter 11's check, unchanged, passes generation 2's
    claim and refuses generation 1's."""
    db, _queue = worker_shop
    work_id = add_work()
    db.execute(
        "UPDATE work SET state = 'running', worker_id = 'till#2' WHERE work_id = ?", (work_id,)
    )
    db.execute(
        "INSERT INTO assignment_leases(work_id, worker_id, expires, generation)"
        " VALUES (?, 'till#2', 1030.0, 2)",
        (work_id,),
    )
    first = impl.Claim(work_id, "s1", "turn 1 of s1", "till", 1, 1010.0)
    second = impl.Claim(work_id, "s1", "turn 1 of s1", "till", 2, 1030.0)
    assert require_holder(db, second, 1021.0) > 0, (
        "the current claim passes chapter 11's holder check"
    )
    with refuses(PermissionError, "chapter 11's holder check for till#1 after till#2 took over"):
        require_holder(db, first, 1021.0)
