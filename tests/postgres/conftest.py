"""Exercise 7's suite: claim, assert_current, observe and finish on a real PostgreSQL server.

    .venv/bin/python -m pytest tests/postgres --impl learner      # your learner/ch13_postgres.py
    .venv/bin/python -m pytest tests/postgres --impl solutions    # the reference

One server for the whole run (``$LUCYSHOP_PG_DSN``, else an embedded one that is stopped
afterwards); each test gets a schema of its own with the shop's tables in it. Where the
``pg`` extra is not installed the suite skips, saying so. Time moves only on the server:
a test that needs an expired lease sets ``expires`` in the past by SQL, or waits for a lease
of a fraction of a second to run out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from impls import IMPL_PATH

from lucyshop.lab import NotStarted, pg_shop
from lucyshop.lab.postgres import missing, postgres_server, scratch_schema

# The test modules import the helpers below as ``from pg_support import ...`` (see the same
# line in tests/learner/conftest.py for why not ``from conftest import``).
sys.modules["pg_support"] = sys.modules[__name__]

CHILD_SECONDS = 60.0  # a shifted child: start Python, connect, one call, on a loaded machine


@pytest.fixture(scope="session")
def pg_server():
    if reason := missing():
        pytest.skip(f"exercise 7 needs PostgreSQL: {reason}")
    with postgres_server() as server:
        yield server


@pytest.fixture
def pg_file(pytestconfig: pytest.Config) -> Path:
    """The ``ch13_postgres.py`` beside the chosen chapter file."""
    return pytestconfig.stash[IMPL_PATH].with_name("ch13_postgres.py")


@pytest.fixture
def pg(pg_file: Path):
    """The exercise-7 implementation under test, loaded fresh."""
    return pg_shop.load_pg_impl(pg_file)


@pytest.fixture(autouse=True)
def _stub_first(request: pytest.FixtureRequest, pg) -> None:
    """While this module's function (``test_pg_claim`` -> ``claim``) is still a stub, fail with
    *its* NotStarted before fixtures call other functions: called with placeholder arguments,
    a stub raises NotStarted, and anything a student wrote fails some other way, ignored here.
    """
    name = request.module.__name__.rpartition(".")[2].removeprefix("test_pg_")
    function = getattr(pg, name, None)
    if function is None:  # a module about the whole exercise, not one function
        return
    placeholders = [None] * function.__code__.co_argcount
    try:
        function(*placeholders)
    except NotStarted:
        raise
    except Exception:  # noqa: BLE001, S110 - a written function, left to the tests
        pass


@pytest.fixture
def dsn(pg_server) -> str:
    with scratch_schema(pg_server, "test") as dsn:
        pg_shop.create_shop(dsn)
        yield dsn


@pytest.fixture
def conn(dsn: str):
    with pg_shop.connect(dsn) as connection:
        yield connection


@pytest.fixture
def add_work(conn) -> Callable[..., int]:
    """``add_work(session="s1", text="a turn") -> work_id``, through the given schema helper."""
    return lambda session="s1", text="a turn": pg_shop.add_work(conn, session, text)


def lease(conn, work_id: int) -> dict[str, Any]:
    """The lease row, with ``left``: seconds until it expires by the server's clock."""
    return conn.execute(
        "SELECT owner, generation, expires,"
        " extract(epoch FROM expires - clock_timestamp())::float AS left"
        " FROM leases WHERE work_id = %s",
        (work_id,),
    ).fetchone()


def state(conn, work_id: int) -> str:
    return conn.execute("SELECT state FROM work WHERE work_id = %s", (work_id,)).fetchone()["state"]


def expire(conn, work_id: int) -> None:
    """Move the lease's expiry one second into the server's past (no waiting, no client clock)."""
    conn.execute(
        "UPDATE leases SET expires = clock_timestamp() - interval '1 second' WHERE work_id = %s",
        (work_id,),
    )


def table(conn, name: str) -> list[dict[str, Any]]:
    return conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()


def snapshot(conn) -> dict[str, list[dict[str, Any]]]:
    return {name: table(conn, name) for name in ("work", "leases", "transcript", "outcomes")}


def claim_source(held: Any) -> str:
    """Python source that rebuilds ``held`` in a child process."""
    return (
        f"pg_shop.PgClaim({held.work_id}, {held.session_id!r}, {held.text!r}, {held.owner!r},"
        f" {held.generation}, __import__('datetime').datetime.fromisoformat("
        f"{held.expires.isoformat()!r}))"
    )


def shifted(pg_file: Path, dsn: str, seconds: float, body: str) -> dict[str, Any]:
    """Run ``body`` in a child whose wall clock reads ``seconds`` off (libfaketime), with
    ``pg`` (the implementation), ``conn`` and ``pg_shop`` in scope; return its ``result``.

    ``body`` may add JSON-able entries to ``result``; an exception in it comes back as
    ``{"error": "Type: message"}``.
    """
    from lucyshop.lab.skew import shifted_env

    code = "\n".join(
        [
            "import json, time",
            "from lucyshop.lab import pg_shop",
            f"pg = pg_shop.load_pg_impl({str(pg_file)!r})",
            f"conn = pg_shop.connect({dsn!r})",
            "result = {'clock': time.time()}",
            "try:",
            textwrap.indent(textwrap.dedent(body).strip("\n"), "    "),
            "except Exception as error:",
            "    result['error'] = type(error).__name__ + ': ' + str(error)",
            "print(json.dumps(result, default=str))",
        ]
    )
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=os.environ | shifted_env(seconds),
        capture_output=True,
        text=True,
        timeout=CHILD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"the shifted child failed: {done.stderr[-2000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert abs(result["clock"] - started - seconds) < 5, (
        f"the child's clock should read {seconds:+}s off: it read {result['clock'] - started:+.1f}s"
    )
    return result
