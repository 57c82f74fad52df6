"""Exercise 1, reuse the owner label: the same label reacquires,
only the generation tells them apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucyshop.validate import owner_of

EXERCISE = "exercise_1_reuse_owner_label"


@pytest.fixture
def result(ran):
    return ran


def test_the_same_owner_label_reacquires_as_a_new_generation(result, read, query):
    first, second = result["worker_ids"]
    assert first != second
    assert owner_of(first) == owner_of(second), "both executions run under one owner label"
    db = read(result["shop"])
    leases = query(
        db,
        "SELECT worker_id, generation FROM assignment_leases WHERE work_id = ?",
        result["work_id"],
    )
    assert leases == [{"worker_id": second, "generation": 2}]


def test_the_old_claims_completion_is_refused_because_its_generation_is_stale(result, read, query):
    assert result["refused"]["completion"].startswith("PermissionError")
    db = read(result["shop"])
    outcomes = query(db, "SELECT generation FROM outcomes WHERE work_id = ?", result["work_id"])
    assert outcomes == [{"generation": 2}], "only the current execution's completion was recorded"
    work = query(db, "SELECT worker_id FROM work WHERE work_id = ?", result["work_id"])
    assert owner_of(work[0]["worker_id"]) == owner_of(result["worker_ids"][0]), (
        "the work is held under the same owner label:"
        " the label did not refuse it, the generation did"
    )


def test_every_other_write_of_the_old_execution_is_refused_too(result, read, query):
    assert result["refused"]["transcript"].startswith("PermissionError")
    assert result["refused"]["supplier"].startswith("PermissionError")
    db = read(result["shop"])
    generations = query(
        db, "SELECT generation FROM transcript WHERE work_id = ?", result["work_id"]
    )
    assert all(row["generation"] == 2 for row in generations)
    assert query(db, "SELECT id FROM assistant_orders WHERE work_id = ?", result["work_id"]) == []


def test_the_log_line_that_shows_the_two_executions_apart(result):
    lines = Path(result["log_file"]).read_text(encoding="utf-8").splitlines()
    first, second = result["worker_ids"]
    assert result["telling_line"] in lines, "the telling line is in the log file, as written"
    assert first in result["telling_line"] and second in result["telling_line"]
    assert any(first in line for line in lines) and any(second in line for line in lines)
