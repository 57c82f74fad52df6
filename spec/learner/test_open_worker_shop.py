"""``open_worker_shop(path)`` and ``LEASE_MIGRATIONS``: the chapter-11 shop plus the lease
schema.

Both arrive written in the learner's file (the chapter gives them); the row stays so that a
learner who breaks them is told. Version 2 of the migrations (an index) is beyond the book:
these tests hold any version a file has."""

from __future__ import annotations

import sqlite3

import pytest
from learner_support import refuses, work_id_of

from lucyshop.lab.sandbox import sandboxed_shop
from lucyshop.store import schema_version


def columns(db: sqlite3.Connection, table: str) -> dict[str, dict]:
    return {row["name"]: dict(row) for row in db.execute(f"PRAGMA table_info({table})")}


@pytest.fixture
def opened(impl, tmp_path):
    """The shop as ``open_worker_shop`` returned it, the connection as our own connection to
    the same file (``db.remote`` is the student's, in the sandbox)."""
    db, queue = sandboxed_shop(impl, tmp_path / "shop.db")
    yield db, queue
    db.close()


def test_it_returns_a_connection_and_the_work_queue(impl, tmp_path, opened):
    db, queue = opened
    probes = impl._sandbox.kit("lucyshop.lab.sandbox.inside.shop_probes")
    assert "sqlite3.Connection" in probes.kinds(db.remote), (
        f"the first item is a sqlite3.Connection, got {db.remote!r}"
    )
    assert "lucyshop.queue.WorkQueue" in probes.kinds(queue), (
        f"the second item is the shop's WorkQueue, got {queue!r}"
    )
    assert (tmp_path / "shop.db").is_file(), "open_worker_shop creates the shop file"
    assert queue.admit("a-1", "s1", "hello") == "accepted", "the queue admits work"


def test_the_chapter_11_schema_is_there(opened):
    db, _queue = opened
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in ("work", "assignment_leases", "assistant_orders", "spending_account"):
        assert table in tables, f"the chapter-11 table {table} is missing"
    assert schema_version(db, "approval") == 1, "the chapter-11 approval schema is applied"


def test_leases_carry_a_whole_number_generation(opened):
    db, _queue = opened
    lease = columns(db, "assignment_leases")
    assert set(lease) == {"work_id", "worker_id", "expires", "generation"}, (
        f"assignment_leases is (work_id, worker_id, expires, generation), got {sorted(lease)}"
    )
    assert lease["generation"]["type"].upper() == "INTEGER", "generation is an INTEGER column"
    assert lease["generation"]["notnull"] == 1, "generation is NOT NULL"


def test_the_transcript_table(opened):
    db, _queue = opened
    transcript = columns(db, "transcript")
    assert list(transcript) == ["seq", "work_id", "generation", "message"], (
        f"transcript is (seq, work_id, generation, message), got {list(transcript)}"
    )
    assert transcript["seq"]["pk"] == 1, "seq is the transcript's primary key"
    assert all(transcript[c]["notnull"] == 1 for c in ("work_id", "generation", "message")), (
        "a transcript row always has its work, generation and message"
    )


def test_the_outcomes_table(opened):
    db, _queue = opened
    outcomes = columns(db, "outcomes")
    assert list(outcomes) == ["work_id", "generation", "status", "result"], (
        f"outcomes is (work_id, generation, status, result), got {list(outcomes)}"
    )
    assert outcomes["work_id"]["pk"] == 1, "work_id is the primary key: one outcome per work item"


def test_an_outcome_status_is_done_blocked_or_canceled(opened):
    db, queue = opened
    assert queue.admit("a-1", "s1", "hello") == "accepted"
    work_id = work_id_of(db, "a-1")
    with refuses(
        sqlite3.IntegrityError,
        "an outcome with status FAILED (the column's constraint allows DONE, BLOCKED, CANCELED)",
    ):
        db.execute("INSERT INTO outcomes VALUES (?, 1, 'FAILED', '{}')", (work_id,))
    db.execute("INSERT INTO outcomes VALUES (?, 1, 'CANCELED', '{}')", (work_id,))
    with refuses(sqlite3.IntegrityError, "a second outcome for one work item"):
        db.execute("INSERT INTO outcomes VALUES (?, 1, 'DONE', '{}')", (work_id,))


def test_lease_migrations_are_recorded_on_line_leases(impl, opened):
    db, _queue = opened
    assert isinstance(impl.LEASE_MIGRATIONS, dict) and impl.LEASE_MIGRATIONS, (
        "LEASE_MIGRATIONS holds at least version 1"
    )
    newest = max(impl.LEASE_MIGRATIONS)
    assert schema_version(db, "leases") == newest, (
        f"the shop records line 'leases' at version {newest}, got {schema_version(db, 'leases')}"
    )


def test_opening_again_is_idempotent_and_keeps_the_data(impl, tmp_path):
    path = tmp_path / "shop.db"
    db, queue = sandboxed_shop(impl, path)
    assert queue.admit("a-1", "s1", "hello") == "accepted"
    work_id = work_id_of(db, "a-1")
    db.execute(
        "INSERT INTO transcript(work_id, generation, message) VALUES (?, 1, '\"hi\"')", (work_id,)
    )
    before = {t: columns(db, t) for t in ("assignment_leases", "transcript", "outcomes")}
    db.remote.close()
    db.close()

    again, queue = sandboxed_shop(impl, path)
    try:
        after = {t: columns(again, t) for t in ("assignment_leases", "transcript", "outcomes")}
        assert after == before, "reopening changes no table"
        assert queue.get(work_id)["text"] == "hello", "reopening keeps the work"
        assert again.execute("SELECT count(*) FROM transcript").fetchone()[0] == 1, (
            "reopening keeps the transcript"
        )
        assert schema_version(again, "leases") == max(impl.LEASE_MIGRATIONS)
    finally:
        again.close()


def test_two_connections_to_one_file(impl, tmp_path):
    first, _ = impl.open_worker_shop(tmp_path / "shop.db")
    second, _ = impl.open_worker_shop(tmp_path / "shop.db")
    try:
        for connection in (first, second):
            counted = connection.execute("SELECT count(*) FROM outcomes").fetchone()
            assert tuple(counted) == (0,), "both connections read the one shop's outcomes"
    finally:
        first.close()
        second.close()
