"""Exercise 7 in the sandbox: the student's ``ch13_postgres.py`` runs in a sandboxed worker
(``lucyshop.lab.sandbox``), never in the process that tests it.

The worker has no network. It reaches the PostgreSQL server through a relay: a Unix socket
named as PostgreSQL's own (``.s.PGSQL.5432``) in a directory it is shown read-only, which the
trusted side forwards to the server. So ``host=`` that directory is all psycopg needs. It
connects as a role of its own (``postgres.student_role``) that may use one test's schema
and nothing else: not the superuser, whose password it never sees, not the server's files.

The trusted side reads the database back on its own connection (``paired``): handing that
connection to a student's function hands the worker its own connection to the same schema.

    with postgres_server() as server, pg_sandbox(chapter, server, workdir=...) as box:
        with scratch_schema(server) as dsn:
            create_shop(dsn)
            with student_role(server, dsn) as role:
                pg = box.load()                               # the student's module
                conn = paired(dsn, box.connect(role))         # ours, paired with the worker's
                pg.claim(conn, "till", ttl=30)                # runs in the worker
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lucyshop.lab.loader import PG_FILE
from lucyshop.lab.sandbox import CallTimedOut, Remote, Sandbox, WorkerDied
from lucyshop.lab.sandbox.relay import Relay
from lucyshop.lab.services.postgres import Server

PORT = 5432
SOCKET = f".s.PGSQL.{PORT}"  # what libpq looks for in the directory named by host=
INSIDE = Path("/sandbox/pg")  # where the relay's directory appears in a sandbox
PROBES = "lucyshop.lab.sandbox.inside.pg_probes"


def target_of(server: Server) -> str | tuple[str, int]:
    """Where the relay forwards to: the server's Unix socket, or its TCP address."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(server.dsn)
    host = str(params.get("host") or "/var/run/postgresql").split(",")[0]
    port = int(str(params.get("port") or PORT).split(",")[0])
    if host.startswith("/"):
        return f"{host}/.s.PGSQL.{port}"
    return (host, port)


@dataclass
class PgSandbox:
    """One sandboxed worker for a student's ``ch13_postgres.py``, and its way to the server."""

    box: Sandbox
    relay: Relay

    @property
    def host(self) -> str:
        """The directory the worker finds the server's socket in (psycopg's ``host=``)."""
        return str(self.box.jail.shows(self.relay.directory, INSIDE))

    def dsn(self, role: dict[str, str]) -> str:
        """The connection string the worker uses for ``role`` (``postgres.student_role``)."""
        from psycopg.conninfo import make_conninfo

        return make_conninfo(host=self.host, port=PORT, connect_timeout=10, **role)

    def load(self, *, seconds: float | None = None) -> Remote:
        """The student's ``ch13_postgres.py``, freshly executed in the worker."""
        return self.box.load(PG_FILE, seconds=seconds)

    def probes(self) -> Remote:
        return self.box.kit(PROBES)

    def connect(self, role: dict[str, str]) -> Remote:
        """A connection of the worker's own, as ``role``: a handle to it."""
        return self.probes().connect(self.dsn(role))


@contextmanager
def pg_sandbox(
    chapter: Path,
    server: Server,
    *,
    workdir: Path,
    scratch: Iterable[Path] = (),
    shown: str | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[PgSandbox]:
    """A worker for the ``ch13_postgres.py`` beside ``chapter`` (staged with it), shown a
    relay to ``server``; ``env`` is more environment for it (a shifted clock)."""
    with Relay(target=target_of(server), name=SOCKET) as relay:
        box = Sandbox(
            chapter,
            scratch=scratch,
            workdir=workdir,
            shown=shown,
            binds=[(relay.directory, INSIDE)],
            env=env,
        )
        with box:
            yield PgSandbox(box, relay)


@contextmanager
def transaction(probes: Remote, connection: Any) -> Iterator[None]:
    """A transaction on the worker's ``connection`` (``probes``: that worker's
    ``PgSandbox.probes()``) around the calls inside: a student's ``assert_current`` locks
    inside its caller's transaction. Rolled back on an error."""
    probes.execute(connection, "BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(CallTimedOut, WorkerDied):
            probes.execute(connection, "ROLLBACK")
        raise
    probes.execute(connection, "COMMIT")


READ_ROWS = 10_000  # rows the trusted side fetches from one query of a student's tables
READ_BYTES = 32 << 20  # bytes of those rows as text (what comes over the wire)
MEASURE_SECONDS = 10  # for the server to measure them (about 7 s a GB of compressed JSON)


class TooLargeToRead(RuntimeError):
    """What a student's code left in its tables is more than the trusted side fetches."""


@functools.cache
def _mirror_class() -> type:
    import psycopg

    class PgMirror(psycopg.Connection):
        """Our connection to a test's schema, paired with the worker's (``remote``): handed to
        a student's function, it is the worker's own connection that the function gets.

        A query that reads rows is measured on the server before any row is fetched (its
        count, and its bytes as text, within ``MEASURE_SECONDS``), and refused past
        ``READ_ROWS`` or ``READ_BYTES``: the tables hold what the student's code wrote,
        however much."""

        paired = True
        remote: Remote | None = None

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            text = query.as_string(self) if hasattr(query, "as_string") else str(query)
            if re.match(r"\s*select\b", text, re.IGNORECASE):
                measure = (
                    "SELECT count(*) AS rows, coalesce(sum(octet_length(r::text)), 0) AS size"
                    f" FROM ({text.rstrip().rstrip(';')}) r"
                )
                try:
                    with self.transaction():
                        super().execute(f"SET LOCAL statement_timeout = '{MEASURE_SECONDS}s'")
                        found = super().execute(measure, params).fetchone()
                except psycopg.errors.QueryCanceled:
                    raise TooLargeToRead(
                        f"the trusted side could not measure in {MEASURE_SECONDS} s what it"
                        f" would fetch from the student's tables: {text[:80]}"
                    ) from None
                rows, size = found["rows"], found["size"]
                if rows > READ_ROWS or size > READ_BYTES:
                    raise TooLargeToRead(
                        f"the trusted side does not fetch {rows} rows of {size} bytes from"
                        f" the student's tables (at most {READ_ROWS} rows, {READ_BYTES >> 20}"
                        f" MiB): {text[:80]}"
                    )
            return super().execute(query, params, **kwargs)

    return PgMirror


def paired(dsn: str, remote: Remote) -> Any:
    """Our own connection to ``dsn`` (autocommit, rows as dicts, like ``pg_shop.connect``),
    paired with the worker's connection ``remote``."""
    from psycopg.rows import dict_row

    connection = _mirror_class().connect(dsn, autocommit=True, row_factory=dict_row)
    connection.remote = remote
    return connection
