"""What exercise 7's role may fill, and what the trusted side reads back (issue 47).

On a real server: the student's role makes no temporary table and no large object, cannot
lift its temporary-file limit, writes no row over ``ROW_BYTES`` and no more than
``SCHEMA_BYTES`` into its schema; and our connection (``box.paired``) measures what a query
would fetch before it fetches any of it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lucyshop.lab.given import pg_shop
from lucyshop.lab.sandbox.postgres import box
from lucyshop.lab.services import postgres

pytestmark = pytest.mark.skipif(postgres.missing() is not None, reason=f"{postgres.missing()}")

MEGABYTE = "SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 31250)"


@pytest.fixture(scope="module")
def server():
    with postgres.postgres_server() as found:
        yield found


@pytest.fixture
def schema_bytes() -> int:
    return postgres.SCHEMA_BYTES


@pytest.fixture
def shop(server, monkeypatch, schema_bytes):
    """A test's schema with the shop in it, bounded at ``schema_bytes``; the student's
    connection to it and ours."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    monkeypatch.setattr(postgres, "SCHEMA_BYTES", schema_bytes)
    with postgres.scratch_schema(server) as dsn:
        pg_shop.create_shop(dsn)
        with postgres.student_role(server, dsn) as role:
            where = {k: v for k, v in conninfo_to_dict(server.dsn).items() if k in ("host", "port")}
            student = psycopg.connect(make_conninfo(**where, **role), autocommit=True)
            ours = box.paired(dsn, None)
            yield student, ours
            student.close()
            ours.close()


def refused(connection, statement: str) -> str:
    import psycopg

    with pytest.raises(psycopg.Error) as error:
        connection.execute(statement)
    return str(error.value)


def test_no_temporary_table_and_no_large_object(shop):
    student, _ours = shop
    assert "permission denied" in refused(student, "CREATE TEMP TABLE fill(blob text)")
    assert "permission denied" in refused(student, "SELECT lo_from_bytea(0, 'x')")
    assert "permission denied" in refused(student, "SELECT lo_create(0)")


def test_temporary_files_are_bounded_and_the_bound_is_the_servers(shop):
    student, _ours = shop
    limit = postgres.ROLE_SETTINGS["temp_file_limit"]
    assert student.execute("SHOW temp_file_limit").fetchone()[0] == limit
    assert "permission denied" in refused(student, "SET temp_file_limit = '10GB'")
    spill = (
        "SELECT count(*) FROM (SELECT md5(g::text) FROM generate_series(1, 2000000) g ORDER BY 1) s"
    )
    assert "temp_file_limit" in refused(student, spill)
    timeout = postgres.ROLE_SETTINGS["statement_timeout"]
    assert student.execute("SHOW statement_timeout").fetchone()[0] == timeout


@pytest.mark.parametrize("schema_bytes", [8 << 20])  # so that filling it takes a second
def test_a_row_over_the_bound_and_a_schema_past_it_are_refused(shop):
    student, _ours = shop
    big = f"INSERT INTO work(session_id, text) VALUES ('s', repeat('x', {postgres.ROW_BYTES + 1}))"
    assert "a student role writes rows of at most" in refused(student, big)
    fill = f"INSERT INTO work(session_id, text) SELECT 's', ({MEGABYTE})"
    for _ in range(7):  # under 8 MiB: written
        student.execute(fill)
    with pytest.raises(Exception, match="a student role may fill at most"):
        for _ in range(20):
            student.execute(fill)


def test_our_reads_are_measured_before_anything_is_fetched(shop):
    """Rows that compress to almost nothing on disk, but not on the wire."""
    student, ours = shop
    student.execute("INSERT INTO work(session_id, text) VALUES ('s', 'a turn')")
    student.execute(
        "INSERT INTO transcript(work_id, generation, message)"
        " SELECT 1, 1, to_jsonb(repeat('ab', 500000)) FROM generate_series(1, 40)"
    )
    with pytest.raises(box.TooLargeToRead, match=r"40 rows of \d+ bytes"):
        ours.execute("SELECT * FROM transcript ORDER BY 1")
    assert ours.execute("SELECT count(*) AS n FROM transcript").fetchone()["n"] == 40


def test_a_read_too_slow_to_measure_is_refused_in_its_time(shop, monkeypatch):
    """A gigabyte that compresses to almost nothing takes the server seconds to
    measure; past ``MEASURE_SECONDS`` (one here) the read is refused, not waited for."""
    student, ours = shop
    monkeypatch.setattr(box, "MEASURE_SECONDS", 1)
    student.execute("INSERT INTO work(session_id, text) VALUES ('s', 'a turn')")
    student.execute(
        "INSERT INTO transcript(work_id, generation, message)"
        " SELECT 1, 1, to_jsonb(repeat('ab', 500000)) FROM generate_series(1, 1000)"
    )
    started = time.monotonic()
    with pytest.raises(box.TooLargeToRead, match="could not measure in 1 s"):
        ours.execute("SELECT * FROM transcript")
    assert time.monotonic() - started < 5


def test_the_servers_queue_and_log_keep_nothing_a_role_could_grow(server, shop):
    """Notifications nobody reads stop at the server's smallest queue; a failed statement
    carrying a megabyte leaves neither its text nor its message in the server's log."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    student, _ours = shop
    listener = psycopg.connect(student.info.dsn, password=student.info.password, autocommit=True)
    listener.execute("LISTEN filling")
    payload = "x" * 7900
    with pytest.raises(psycopg.Error, match="too many notifications"):
        for _ in range(1000):
            student.execute(f"NOTIFY filling, '{payload}'")
    listener.close()
    log = Path(conninfo_to_dict(server.dsn)["host"]).parent / "server.log"
    before = log.stat().st_size
    refused(student, f"SELECT '{'y' * 1_000_000}'::integer")
    assert log.stat().st_size - before < 10_000
