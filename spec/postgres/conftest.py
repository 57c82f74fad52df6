"""Exercise 7's suite: claim, assert_current, observe and finish on a real PostgreSQL server.

    .venv/bin/python -m pytest spec/postgres --impl learner    # your learner/ch13_postgres.py
    .venv/bin/python -m pytest spec/postgres --impl solutions  # the reference

One server for the whole run (``$LUCYSHOP_PG_DSN``, else an embedded one that is stopped
afterwards); each test gets a schema of its own with the shop's tables in it. Where the
``pg`` extra is not installed the suite skips, saying so.

The student's ``ch13_postgres.py`` runs in a sandboxed worker (``lucyshop.lab.sandbox.postgres``),
never in this process. It reaches the server through a relay's Unix socket, as a role that
may use the test's schema and nothing else; ``conn`` is our own connection to that schema,
paired with the worker's: handed to a student's function, it is the worker's connection the
function gets, and every read in a test reads the database itself, on ours. Time moves only
on the server: a test that needs an expired lease sets ``expires`` in the past by SQL, or
waits for a lease of a fraction of a second to run out; a worker whose wall clock is wrong
is a second sandbox whose clock libfaketime shifts.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lucyshop.lab.check.plugin.chapter import budget
from lucyshop.lab.evidence.receipts import shown
from lucyshop.lab.given import pg_shop
from lucyshop.lab.given.stubs import placeholders, stub_nodes
from lucyshop.lab.loader import PG_FILE
from lucyshop.lab.sandbox import CallTimedOut, Remote, WorkerDied
from lucyshop.lab.sandbox.jail import remove_tree
from lucyshop.lab.sandbox.postgres.box import PgSandbox, paired, pg_sandbox
from lucyshop.lab.services.postgres import (
    missing_for_tests,
    schema_of,
    scratch_schema,
    student_role,
)

CLOCK_SLACK = 5.0  # seconds a shifted worker's clock may differ from the shift asked for


@pytest.fixture
def pg_file(chapter_file: Path) -> Path:
    """The ``ch13_postgres.py`` beside the chosen chapter file."""
    path = chapter_file.with_name(PG_FILE)
    if not path.is_file():
        pytest.fail(f"no {PG_FILE} beside {chapter_file}: exercise 7 lives there")
    return path


@contextlib.contextmanager
def _box(chapter: Path, server, basetemp: Path, env: dict | None = None) -> Iterator[PgSandbox]:
    workdir = Path(tempfile.mkdtemp(prefix="ch13-pg-"))
    try:
        with pg_sandbox(
            chapter,
            server,
            workdir=workdir,
            scratch=[basetemp],
            shown=shown(chapter.with_name(PG_FILE)),
            env=env,
        ) as box:
            yield box
    finally:
        remove_tree(workdir)


@pytest.fixture(scope="session")
def pg_box(chapter_file: Path, pg_server, tmp_path_factory: pytest.TempPathFactory):
    """The session's sandboxed worker for the student's ``ch13_postgres.py``."""
    with _box(chapter_file, pg_server, tmp_path_factory.getbasetemp()) as box:
        yield box


@pytest.fixture(scope="session")
def clock_box(chapter_file: Path, pg_server, tmp_path_factory: pytest.TempPathFactory):
    """A second worker, whose wall clock libfaketime shifts (each test that uses it sets the
    shift it wants: ``shifted``)."""
    from lucyshop.lab.skew import shifted_env

    if reason := missing_for_tests():
        pytest.fail(f"exercise 7's clock tests: {reason}")
    with _box(chapter_file, pg_server, tmp_path_factory.getbasetemp(), shifted_env(0)) as box:
        yield box


def _told(request: pytest.FixtureRequest, box: PgSandbox) -> PgSandbox:
    """``box``, told which functions already hung (``make check``'s plugin)."""
    outcomes = request.config.pluginmanager.get_plugin("lucyshop-outcomes")
    if outcomes is not None:  # a function that hung fails at once from now on
        box.box.hung = outcomes.hung
    return box


@pytest.fixture
def pg(request: pytest.FixtureRequest, pg_file: Path, pg_box: PgSandbox) -> Remote:
    """The student's ``ch13_postgres.py``, loaded fresh in the sandbox for this test."""
    return _told(request, pg_box).load(seconds=budget(request))


@pytest.fixture
def worker(pg: Remote, pg_box: PgSandbox) -> Remote:
    """What the test does inside the worker (``lucyshop.lab.sandbox.inside.pg_probes``)."""
    return pg_box.probes()


@pytest.fixture(autouse=True)
def _stub_first(request: pytest.FixtureRequest) -> None:
    """While this module's function (``test_pg_claim`` -> ``claim``) is still a stub by its
    syntax, fail with *its* NotStarted, raised by the stub itself in the sandbox, before any
    fixture calls other functions."""
    name = request.module.__name__.rpartition(".")[2].removeprefix("test_pg_")
    node = stub_nodes(request.getfixturevalue("pg_file")).get(name)
    if node is not None:
        args, kwargs = placeholders(node)
        getattr(request.getfixturevalue("pg"), name)(*args, **kwargs)


@pytest.fixture(scope="session")
def pg_admin(pg_server) -> Iterator[Any]:
    """The superuser's connection that makes and drops each test's schema and role (one for
    the session: a connection costs a server process)."""
    import psycopg

    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        yield admin


@pytest.fixture
def dsn(pg_server, pg_admin) -> Iterator[str]:
    """Our own way into the test's schema, with the shop's tables in it."""
    from psycopg import sql

    with scratch_schema(pg_server, "test", admin=pg_admin) as dsn:
        with pg_admin.transaction():  # pg_shop.create_shop(dsn), on the admin's connection
            schema = sql.Identifier(schema_of(dsn))
            pg_admin.execute(sql.SQL("SET LOCAL search_path = {}").format(schema))
            pg_admin.execute(pg_shop.SCHEMA)
        yield dsn


@pytest.fixture
def role(pg_server, pg_admin, dsn: str) -> Iterator[dict[str, str]]:
    """The worker's role: it may use the test's schema and nothing else."""
    with student_role(pg_server, dsn, admin=pg_admin) as role:
        yield role


@pytest.fixture
def conn(pg: Remote, pg_box: PgSandbox, dsn: str, role: dict[str, str]) -> Iterator[Any]:
    """Our connection to the test's schema, paired with a connection of the worker's."""
    remote = pg_box.connect(role)
    try:
        with paired(dsn, remote) as connection:
            yield connection
    finally:
        with contextlib.suppress(CallTimedOut, WorkerDied):
            pg_box.probes().close(remote)


@pytest.fixture
def add_work(conn) -> Callable[..., int]:
    """``add_work(session="s1", text="a turn") -> work_id``, through the given schema helper."""
    return lambda session="s1", text="a turn": pg_shop.add_work(conn, session, text)


@pytest.fixture
def claim_as(pg, conn) -> Callable[..., Any]:
    """``claim_as(owner, ttl)``: exercise 7's ``claim`` on this test's schema (what the shared
    ``held`` fixture claims with)."""
    return lambda owner, ttl: pg.claim(conn, owner, ttl=ttl)


@dataclass
class Shifted:
    """The student's file in a worker whose wall clock is off, on the test's schema."""

    pg: Remote  # the module
    conn: Remote  # a connection of that worker's
    worker: Remote  # its postgres.probes


@pytest.fixture
def shifted(request: pytest.FixtureRequest, clock_box: PgSandbox, pg_file: Path, role) -> Callable:
    """``shifted(seconds) -> Shifted``: the student's file in a worker whose wall clock reads
    ``seconds`` off (verified here), connected to the test's schema."""
    opened: list[Remote] = []

    def make(seconds: float) -> Shifted:
        box = _told(request, clock_box)
        module = box.load(seconds=budget(request))
        probes = box.probes()
        before = time.time()
        clock = probes.shift(seconds)
        assert abs(clock - before - seconds) < CLOCK_SLACK, (
            f"the shifted worker's clock should read {seconds:+}s off: it read"
            f" {clock - before:+.1f}s"
        )
        connection = box.connect(role)
        opened.append(connection)
        return Shifted(module, connection, probes)

    yield make
    for connection in opened:
        with contextlib.suppress(CallTimedOut, WorkerDied):
            clock_box.probes().close(connection)
