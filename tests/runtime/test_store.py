"""store: the connection's settings, ``immediate()`` transactions, and versioned migrations."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from lucyshop import store
from lucyshop.approval import open_shop
from lucyshop.store import (
    BUSY_TIMEOUT_MS,
    RETRY_S,
    WriteLockTimeout,
    connect,
    schema_version,
)


@pytest.fixture
def db(tmp_path):
    connection = connect(tmp_path / "store.db")
    connection.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    yield connection
    connection.close()


def notes(connection) -> list[str]:
    return [row[0] for row in connection.execute("SELECT body FROM notes ORDER BY id")]


def tables(connection) -> set[str]:
    rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {row[0] for row in rows}


# ---------------------------------------------------------------- connect


def test_connect_uses_wal_full_sync_a_busy_timeout_and_no_hidden_transactions(tmp_path):
    db = connect(tmp_path / "shop.db")
    try:
        assert db.isolation_level is None
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
        assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        db.execute("CREATE TABLE t(x)")
        db.execute("INSERT INTO t VALUES (1)")
        assert not db.in_transaction  # autocommit: nothing is left open after a write
    finally:
        db.close()


def test_connect_takes_a_custom_bounded_busy_timeout(tmp_path):
    db = connect(tmp_path / "shop.db", busy_timeout_ms=250)
    try:
        assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 250
    finally:
        db.close()


def test_wal_is_recorded_in_the_file_for_every_later_connection(tmp_path):
    connect(tmp_path / "shop.db").close()
    plain = sqlite3.connect(tmp_path / "shop.db")
    try:
        assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        plain.close()


# ---------------------------------------------------------------- immediate


def test_immediate_yields_the_shop_whose_execute_writes_inside_the_transaction(db, tmp_path):
    """The chapter's spelling: ``with db.immediate() as connection: connection.execute(...)``."""
    with db.immediate() as connection:
        assert connection is db
        assert connection.in_transaction
        connection.execute("INSERT INTO notes(body) VALUES (?)", ("through the connection",))
    assert not db.in_transaction
    other = connect(tmp_path / "store.db")
    try:
        assert notes(other) == ["through the connection"]
    finally:
        other.close()


def test_the_shop_is_its_own_connection_for_reads_outside_a_transaction(db):
    db.execute("INSERT INTO notes(body) VALUES ('read back')")
    assert db.connection is db
    assert db.connection.execute("SELECT count(*) FROM notes").fetchone()[0] == 1
    assert not db.in_transaction


def test_a_failure_inside_the_chapters_with_block_writes_nothing(db):
    with pytest.raises(sqlite3.IntegrityError), db.immediate() as connection:
        connection.execute("INSERT INTO notes(body) VALUES ('first')")
        connection.execute("INSERT INTO notes(body) VALUES (NULL)")
    assert not db.in_transaction
    assert notes(db) == []


def test_immediate_commits_on_success(db, tmp_path):
    with db.immediate():
        db.execute("INSERT INTO notes(body) VALUES ('kept')")
    assert not db.in_transaction
    other = connect(tmp_path / "store.db")
    try:
        assert notes(other) == ["kept"]
    finally:
        other.close()


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_immediate_rolls_back_and_reraises_on_any_exception(db, error):
    with pytest.raises(type(error)) as raised, db.immediate():
        db.execute("INSERT INTO notes(body) VALUES ('lost')")
        raise error
    assert raised.value is error
    assert not db.in_transaction
    assert notes(db) == []


def test_immediate_refuses_nesting_and_the_outer_transaction_stays_usable(db):
    with db.immediate():
        db.execute("INSERT INTO notes(body) VALUES ('before')")
        with pytest.raises(RuntimeError, match="nesting is refused"), db.immediate():
            db.execute("INSERT INTO notes(body) VALUES ('inner')")
        assert db.in_transaction
        db.execute("INSERT INTO notes(body) VALUES ('after')")
    assert notes(db) == ["before", "after"]


def test_immediate_refuses_to_join_a_transaction_opened_by_hand(db):
    db.execute("BEGIN")
    db.execute("INSERT INTO notes(body) VALUES ('by hand')")
    with pytest.raises(RuntimeError, match="already inside a transaction"), db.immediate():
        pass
    db.execute("ROLLBACK")
    assert notes(db) == []


def test_immediate_takes_the_write_lock_before_any_read(db, tmp_path):
    other = connect(tmp_path / "store.db", busy_timeout_ms=50)
    try:
        with db.immediate():  # no statement yet: the lock must already be held
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                other.execute("BEGIN IMMEDIATE")
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                other.execute("INSERT INTO notes(body) VALUES ('other')")
            db.execute("INSERT INTO notes(body) VALUES ('holder')")
        with other.immediate():
            other.execute("INSERT INTO notes(body) VALUES ('other')")
        assert notes(db) == ["holder", "other"]
    finally:
        other.close()


WRITER = textwrap.dedent(
    """
    import sqlite3, sys
    from lucyshop.store import connect
    db = connect(sys.argv[1], busy_timeout_ms=100)
    try:
        with db.immediate():
            db.execute("INSERT INTO notes(body) VALUES ('child')")
    except sqlite3.OperationalError as error:
        print("refused:", error)
        raise SystemExit(3)
    print("written")
    """
)


def test_another_process_is_blocked_while_immediate_is_held_and_writes_after(db, tmp_path):
    path = str(tmp_path / "store.db")
    argv = [sys.executable, "-c", WRITER, path]
    with db.immediate():
        db.execute("INSERT INTO notes(body) VALUES ('parent')")
        blocked = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
    assert blocked.returncode == 3, blocked.stderr
    assert "database is locked" in blocked.stdout
    assert notes(db) == ["parent"]
    after = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
    assert after.returncode == 0, after.stderr
    assert notes(db) == ["parent", "child"]


def hold_lock(
    path, seconds: float, held: threading.Event, release: threading.Event | None = None
) -> threading.Thread:
    """Another connection takes the write lock, signals ``held``, and releases it after
    ``seconds``, or as soon as ``release`` is set."""

    def run() -> None:
        other = connect(path)
        try:
            other.execute("BEGIN IMMEDIATE")
            held.set()
            (release or threading.Event()).wait(seconds)  # not time.sleep: a test records it
            other.execute("ROLLBACK")
        finally:
            other.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert held.wait(10), "the other connection never took the lock"
    return thread


def test_a_writer_waits_for_a_lock_held_briefly_and_then_writes(db, tmp_path):
    held, release = threading.Event(), threading.Event()
    holder = hold_lock(tmp_path / "store.db", 60, held, release=release)
    tries: list[float] = []
    real_sleep = time.sleep

    def waiting(seconds: float) -> None:  # the lock is let go once the writer has waited
        tries.append(seconds)
        if len(tries) >= 5:
            release.set()
        real_sleep(seconds)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store.time, "sleep", waiting)
        with db.immediate():
            db.execute("INSERT INTO notes(body) VALUES ('after the wait')")
    holder.join(10)
    assert len(tries) >= 5, f"immediate() got a held lock after {len(tries)} tries"
    assert notes(db) == ["after the wait"]
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS, "restored"


def test_the_wait_ends_at_the_busy_timeout_with_a_clear_error_and_writes_nothing(tmp_path):
    patient = connect(tmp_path / "store.db", busy_timeout_ms=200)
    patient.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    held, release = threading.Event(), threading.Event()
    holder = hold_lock(tmp_path / "store.db", 60, held, release=release)  # until released
    try:
        started = time.monotonic()
        refused = pytest.raises(WriteLockTimeout, match="within the busy timeout of 200 ms")
        with refused, patient.immediate():
            patient.execute("INSERT INTO notes(body) VALUES ('never')")
        waited = time.monotonic() - started
        # It gave up at its own timeout: the other connection still held the lock then.
        assert holder.is_alive() and not release.is_set()
        assert waited >= 0.2, f"gave up after {waited:.2f}s, before its 0.2 s timeout"
        assert issubclass(WriteLockTimeout, sqlite3.OperationalError), "callers' except still works"
        assert not patient.in_transaction
        assert patient.execute("PRAGMA busy_timeout").fetchone()[0] == 200, "timeout restored"
    finally:
        release.set()
        holder.join(10)
    assert notes(patient) == [], "the refused transaction wrote nothing"
    patient.close()


TRIES = 20


def test_a_waiting_writer_retries_at_the_same_short_pace_however_long_it_has_waited(
    db, tmp_path, monkeypatch
):
    """Fairness: SQLite's own handler backs off to 100 ms a try, so an old waiter loses the lock
    to newcomers. Here no sleep grows with the wait."""
    sleeps: list[float] = []
    real_sleep = time.sleep
    enough = threading.Event()  # the lock is held until the waiter has tried TRIES times

    def recorded(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) >= TRIES:
            enough.set()
        real_sleep(seconds)

    monkeypatch.setattr(store.time, "sleep", recorded)
    held = threading.Event()
    holder = hold_lock(tmp_path / "store.db", 4.0, held, release=enough)
    with db.immediate():
        pass
    holder.join(10)
    assert enough.is_set(), f"the lock was released before {TRIES} tries: {len(sleeps)}"
    assert max(sleeps) <= 1.5 * RETRY_S, f"a retry slept {max(sleeps) * 1000:.1f} ms"
    late = sleeps[len(sleeps) // 2 :]
    assert sum(late) / len(late) <= RETRY_S * 1.5, "later tries wait no longer than early ones"


def test_an_error_other_than_busy_is_raised_at_once(tmp_path):
    path = tmp_path / "not-a-db"
    path.write_bytes(b"this is not a database file, just text" * 100)
    plain = sqlite3.connect(path, isolation_level=None, factory=store.ShopConnection)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="not a database"), plain.immediate():
            pass
    finally:
        plain.close()


# ---------------------------------------------------------------- migrate


def test_migrate_applies_every_version_in_order_and_records_it(db):
    migrations = {
        3: ("ALTER TABLE items ADD COLUMN size TEXT", "INSERT INTO log VALUES (3)"),
        1: (
            "CREATE TABLE items(name TEXT)",
            "CREATE TABLE log(version INTEGER)",
            "INSERT INTO log VALUES (1)",
        ),
        2: ("ALTER TABLE items ADD COLUMN colour TEXT", "INSERT INTO log VALUES (2)"),
    }
    assert db.migrate("items", migrations) == 3
    assert [row[0] for row in db.execute("SELECT version FROM log ORDER BY rowid")] == [1, 2, 3]
    columns = [row[1] for row in db.execute("PRAGMA table_info(items)")]
    assert columns == ["name", "colour", "size"]
    assert schema_version(db, "items") == 3


def test_migrate_twice_applies_nothing_the_second_time(db):
    migrations = {
        1: ("CREATE TABLE applied(version INTEGER)", "INSERT INTO applied VALUES (1)"),
        2: ("INSERT INTO applied VALUES (2)",),
    }
    assert db.migrate("log", migrations) == 2
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    assert db.migrate("log", migrations) == 2
    db.set_trace_callback(None)
    assert [row[0] for row in db.execute("SELECT version FROM applied ORDER BY rowid")] == [1, 2]
    assert not any("INSERT" in s or "BEGIN" in s for s in statements), statements


def test_migrate_applies_only_the_versions_above_the_recorded_one(db):
    first = {1: ("CREATE TABLE applied(version INTEGER)", "INSERT INTO applied VALUES (1)")}
    db.migrate("log", first)
    both = {**first, 2: ("INSERT INTO applied VALUES (2)",)}
    assert db.migrate("log", both) == 2
    assert [row[0] for row in db.execute("SELECT version FROM applied ORDER BY rowid")] == [1, 2]


def test_a_failing_version_leaves_the_earlier_one_applied_and_nothing_of_itself(db):
    migrations = {
        1: ("CREATE TABLE one(x)", "INSERT INTO one VALUES (1)"),
        2: ("CREATE TABLE two(x)", "INSERT INTO two VALUES (2)", "INSERT INTO missing VALUES (3)"),
    }
    with pytest.raises(sqlite3.OperationalError, match="missing"):
        db.migrate("line", migrations)
    assert not db.in_transaction
    assert schema_version(db, "line") == 1
    assert [row[0] for row in db.execute("SELECT x FROM one")] == [1]
    assert "two" not in tables(db)


def test_a_database_newer_than_the_code_is_refused_and_left_unchanged(db):
    newer = {
        1: ("CREATE TABLE one(x)",),
        2: ("CREATE TABLE two(x)",),
        3: ("CREATE TABLE three(x)",),
    }
    db.migrate("line", newer)
    before = tables(db)
    older = {1: ("CREATE TABLE one(x)",), 2: ("CREATE TABLE two(x)", "INSERT INTO two VALUES (9)")}
    with pytest.raises(RuntimeError, match="newer than this code"):
        db.migrate("line", older)
    assert schema_version(db, "line") == 3
    assert tables(db) == before
    assert db.execute("SELECT count(*) FROM two").fetchone()[0] == 0


def test_each_line_keeps_its_own_version(db):
    db.migrate("a", {1: ("CREATE TABLE a1(x)",), 2: ("CREATE TABLE a2(x)",)})
    db.migrate("b", {1: ("CREATE TABLE b1(x)",)})
    assert (schema_version(db, "a"), schema_version(db, "b")) == (2, 1)
    assert {"a1", "a2", "b1"} <= tables(db)


@pytest.mark.parametrize("version", [0, -1, "1", 1.5, None])
def test_bad_version_keys_are_refused_before_anything_is_written(db, version):
    with pytest.raises(ValueError, match="whole numbers from 1"):
        db.migrate("line", {1: ("CREATE TABLE one(x)",), version: ("CREATE TABLE bad(x)",)})
    assert "one" not in tables(db) and "bad" not in tables(db)
    assert schema_version(db, "line") == 0


@pytest.mark.parametrize("line", ["", None, 3])
def test_a_migration_line_needs_a_name(db, line):
    with pytest.raises(ValueError, match="non-empty name"):
        db.migrate(line, {1: ("CREATE TABLE one(x)",)})
    assert "one" not in tables(db)


def test_the_chapters_lease_migration_applies_once_and_a_second_call_changes_nothing(tmp_path):
    """Chapter 13 opens every worker's shop with ``db.migrate("leases", {...})``: the second
    opening must not add the generation column again (SQLite would refuse a duplicate)."""
    leases = {
        1: (
            "ALTER TABLE assignment_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 1",
            "CREATE TABLE outcomes(work_id INTEGER PRIMARY KEY, result TEXT NOT NULL)",
        )
    }
    shop, _ = open_shop(tmp_path / "shop.db")
    try:
        assert shop.migrate("leases", leases) == 1
        columns = [row[1] for row in shop.execute("PRAGMA table_info(assignment_leases)")]
        assert columns.count("generation") == 1
        before = tables(shop)
        assert shop.migrate("leases", leases) == 1
        assert tables(shop) == before
        assert schema_version(shop, "leases") == 1
    finally:
        shop.close()


@pytest.mark.parametrize(
    "statements", ["CREATE TABLE one(x)", None, ("CREATE TABLE one(x)", 7), {"CREATE TABLE x(y)"}]
)
def test_a_version_that_is_not_a_list_of_statements_is_refused_before_anything_is_written(
    db, statements
):
    before = tables(db)
    with pytest.raises(ValueError, match="tuple or list of SQL statements"):
        db.migrate("line", {1: ("CREATE TABLE first(x)",), 2: statements})
    assert tables(db) == before
    assert schema_version(db, "line") == 0
