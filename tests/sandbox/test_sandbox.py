"""The sandbox itself: what crosses the wire, what the jail lets a student's file see and do,
and how the trusted side survives a worker that hangs, dies or lies."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sandbox_files import ROOT

from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.sandbox import (
    CallTimedOut,
    Sandbox,
    StudentError,
    WorkerDied,
    jail,
    wire,
)
from lucyshop.lab.sandbox.host import cgroups, uids
from lucyshop.lab.sandbox.remote import confined_file

needs_bwrap = pytest.mark.skipif(
    jail.isolation() != "bwrap",
    reason="no bubblewrap can make namespaces here (see jail.describe())",
)

STUDENT = """
import dataclasses, os, socket, sys, time, unittest
from pathlib import Path
from lucyshop.lab import NotStarted

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int

    @property
    def total(self):
        return self.x + self.y

def echo(value):
    return value

def point(x, y):
    return Point(x, y)

def raises(kind):
    if kind == "value":
        raise ValueError("bad input")
    if kind == "skip":
        raise unittest.SkipTest("counted as a pass?")
    if kind == "exit":
        sys.exit(0)
    if kind == "stub":
        raise NotStarted("raises", "13b § Somewhere")
    raise KeyError(kind)

def hang():
    while True:
        time.sleep(0.01)

def die():
    os._exit(7)

def read(path):
    return Path(path).read_text()

def write(path, text):
    Path(path).write_text(text)
    return len(text)

def listing(path):
    return sorted(os.listdir(path))

def environment():
    return dict(os.environ)

def connect(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return "connected"

def call_back(thing, *names):
    return [getattr(thing, name)() for name in names]
"""


@pytest.fixture
def box(tmp_path: Path):
    source = tmp_path / "hand-in" / "ch13_leases.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(STUDENT))
    (tmp_path / "scratch").mkdir()
    with Sandbox(source, scratch=[tmp_path / "scratch"], workdir=tmp_path / "work") as sandbox:
        yield sandbox


def test_values_cross_by_value(box):
    impl = box.load(seconds=30)
    value = {"a": (1, 2.5, None), "b": [True, b"\x00\xff", frozenset({"x"})], 3: {"k": Path("/p")}}
    assert impl.echo(value) == value
    assert type(impl.echo((1, 2))) is tuple


def test_a_returned_dataclass_is_ours_and_its_properties_are_asked(box):
    impl = box.load(seconds=30)
    got = impl.point(2, 3)
    assert dataclasses.is_dataclass(got) and (got.x, got.y) == (2, 3)
    assert got.total == 5, "a property runs the student's code, in the worker"
    moved = dataclasses.replace(got, x=10)
    assert moved.total == 13, "a changed copy travels back by value"
    assert impl.echo(got) == got


def test_exceptions_are_rebuilt_by_type_and_a_skip_is_not_a_skip(box):
    impl = box.load(seconds=30)
    with pytest.raises(ValueError, match="bad input"):
        impl.raises("value")
    with pytest.raises(StudentError) as skipped:
        impl.raises("skip")
    assert type(skipped.value).__name__ == "SkipTest"
    assert not isinstance(skipped.value, pytest.skip.Exception)
    with pytest.raises(StudentError) as exited:
        impl.raises("exit")
    assert type(exited.value).__name__ == "SystemExit"
    with pytest.raises(NotStarted) as stub:
        impl.raises("stub")
    assert (stub.value.function, stub.value.section) == ("raises", "13b § Somewhere")


def test_a_hang_costs_its_deadline_and_the_next_load_starts_afresh(box):
    impl = box.load(seconds=1.5)
    with pytest.raises(CallTimedOut, match=r"timed out after 1\.5 s in hang\(\)"):
        impl.hang()
    assert not box.alive(), "the hung worker was killed"
    assert box.load(seconds=30).echo(1) == 1


def test_a_worker_that_exits_is_named_and_replaced(box):
    impl = box.load(seconds=30)
    with pytest.raises(WorkerDied, match=r"die\(\)"):
        impl.die()
    assert box.load(seconds=30).echo("again") == "again"


@needs_bwrap
def test_the_jail_hides_the_reference_the_tests_and_git(box):
    impl = box.load(seconds=30)
    hidden_files = ("solutions/ch13_leases.py", "tests/conftest.py", "spec/conftest.py")
    for hidden in (ROOT / name for name in hidden_files):
        with pytest.raises(FileNotFoundError):
            impl.read(str(hidden))
    with pytest.raises(FileNotFoundError):
        impl.listing(str(ROOT / ".git"))
    assert set(impl.listing(str(ROOT))) <= {"src", ".venv"}, "only the runtime and the venv"


@needs_bwrap
def test_only_the_scratch_is_writable(box, tmp_path):
    impl = box.load(seconds=30)
    assert impl.write(str(tmp_path / "scratch" / "note.txt"), "ok") == 2
    assert (tmp_path / "scratch" / "note.txt").read_text() == "ok"
    for target in (ROOT / "src" / "planted.py", ROOT / "conftest.py", ROOT / ".venv" / "x.pth"):
        with pytest.raises(OSError):
            impl.write(str(target), "planted")
        assert not target.exists()
    impl.write(str(tmp_path / "outside.txt"), "private")  # the sandbox's own /tmp, not ours
    assert not (tmp_path / "outside.txt").exists()


@needs_bwrap
def test_no_network_and_no_secrets(box, monkeypatch):
    monkeypatch.setenv("LUCYSHOP_TEST_SECRET", "hunter2")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        box.stop()  # the next load starts a worker with today's environment
        impl = box.load(seconds=30)
        with pytest.raises(ConnectionError):
            impl.connect(port)
    assert "LUCYSHOP_TEST_SECRET" not in impl.environment()
    assert "hunter2" not in repr(impl.environment())


def test_call_backs_reach_what_a_kind_offers_and_answer_by_value(box):
    """A stop event offers ``is_set`` and ``wait`` (``callbacks``), not ``set``; a function is
    called, and what it returns comes back by value or not at all; an object of a kind that
    offers nothing is never handed in."""
    impl = box.load(seconds=30)
    event = threading.Event()
    assert impl.call_back(event, "is_set") == [False]
    with pytest.raises(Exception, match="may not use 'set'"):
        impl.call_back(event, "set")
    assert not event.is_set()
    assert impl.call_back(lambda: 42, "__call__") == [42]
    with pytest.raises(Exception, match="cannot be handed back"):
        impl.call_back(lambda: sqlite3.connect(":memory:"), "__call__")

    class Handed:
        def public(self) -> int:
            return 42

    with pytest.raises(TypeError, match="cannot be handed in"):
        impl.call_back(Handed(), "public")


def test_a_bad_frame_is_refused_not_built():
    codec = wire.Codec(lambda v: wire.handle("worker", 1, "x"), lambda b: b, lambda *a: a)
    for bad in ({"$pickle": "gASV"}, {"$tuple": 1}, {"$dict": [[[1], 2]]}, {"a": 1, "b": 2}):
        with pytest.raises(wire.BadFrame):
            codec.decode(bad)
    deep: object = 1
    for _ in range(wire.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(wire.BadFrame):
        codec.decode(deep)


def test_the_trusted_side_never_follows_a_planted_link(tmp_path):
    (tmp_path / "scratch").mkdir()
    secret = tmp_path / "secret.db"
    secret.write_text("not yours")
    link = tmp_path / "scratch" / "shop.db"
    link.symlink_to(secret)
    with pytest.raises(ValueError, match="not a file of this"):
        confined_file(link, [tmp_path / "scratch"])
    os.mkfifo(tmp_path / "scratch" / "fifo.db")
    with pytest.raises(ValueError, match="not a regular file"):
        confined_file(tmp_path / "scratch" / "fifo.db", [tmp_path / "scratch"])


@pytest.mark.parametrize("mode", ["bwrap", "user"])
def test_a_preload_reaches_the_sandboxed_python_alone(mode, tmp_path, monkeypatch):
    """bwrap, prlimit and setpriv run as root before the code: a preload (a shifted clock's
    libfaketime) loaded in them left root-owned semaphores the unprivileged code could not open.
    It is set by ``env`` just before the Python, never in the environment they start with."""
    from lucyshop.lab.sandbox import jail

    started = {}
    monkeypatch.setattr(jail, "ready_for_user", lambda: "")
    monkeypatch.setattr(jail, "sandbox_uid", lambda: uids.UID_FIRST)  # no pool needed here
    monkeypatch.setattr(
        jail.subprocess, "Popen", lambda argv, env, **_kw: started.update(argv=argv, env=env)
    )
    box = jail.Jail(tmp_path, (tmp_path,), mode=mode)
    box.popen(["python", "-c", "pass"], env={"LD_PRELOAD": "/lib/faketime.so", "FAKETIME": "+5"})
    argv = started["argv"]
    assert "LD_PRELOAD" not in started["env"] and started["env"]["FAKETIME"] == "+5"
    at = argv.index("/usr/bin/env")
    assert argv[at : at + 3] == ["/usr/bin/env", "LD_PRELOAD=/lib/faketime.so", "python"]


FORK_UNTIL_REFUSED = """
import os, time
forked = 0
try:
    while forked < 4 * {limit}:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        forked += 1
except OSError as error:
    print("refused:", error.strerror)
print("forked:", forked, flush=True)
"""


@needs_bwrap
@pytest.mark.skipif(
    bool(cgroups.home("pids")[1]), reason=f"no process-count limit: {cgroups.home('pids')[1]}"
)
def test_a_fork_loop_under_bubblewrap_stops_at_the_process_count_limit(tmp_path):
    """Root's processes escape ``RLIMIT_NPROC`` even when mapped to another uid inside a
    namespace: root's sandboxes are counted by a pids cgroup of their own, an ordinary user's
    by the limit in their own user namespace. Either way the loop is refused below 4x."""
    box = jail.Jail(tmp_path, (tmp_path,), mode="bwrap")
    code = FORK_UNTIL_REFUSED.format(limit=jail.NPROC)
    proc = box.popen([sys.executable, "-c", code], env={}, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert "refused:" in out, out
    forked = int(out.split("forked:")[1])
    assert 0 < forked <= jail.NPROC, out


def test_a_dead_checks_empty_pid_groups_are_swept_and_a_live_ones_kept(tmp_path):
    """Groups are named after the process that made them: a sweep removes an empty group of a
    process that is gone, and an empty group of its own only once it has settled."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    now = int(time.time())
    names = {
        "dead": f"lucyshop-{gone.pid}-0-{now}",
        "young": f"lucyshop-{os.getpid()}-0-{now}",
        "old": f"lucyshop-{os.getpid()}-1-{now - 120}",
        "other": "lucyshop-probe",
    }
    for name in names.values():
        (tmp_path / name).mkdir()
    cgroups.sweep(tmp_path, settled=60)
    left = {key for key, name in names.items() if (tmp_path / name).exists()}
    assert left == {"young", "other"}


def test_a_loaded_file_is_compiled_once_for_the_same_bytes_and_run_afresh(tmp_path, monkeypatch):
    """The worker's loader: a second load of the same file reuses its compiled code but runs it
    from the top (a new module), and a file whose bytes changed is compiled again."""
    import importlib.util

    from lucyshop.lab.sandbox.inside.worker import CompiledOnce

    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as in the sandbox: no __pycache__
    path = tmp_path / "m.py"

    def load():
        loader = CompiledOnce("m", str(path))
        spec = importlib.util.spec_from_file_location("m", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    path.write_text("def f():\n    return 1\n\nstate = []\n")
    first, second = load(), load()
    assert first.f.__code__ is second.f.__code__, "the same bytes are compiled once"
    assert first.state is not second.state and first is not second, "each load runs afresh"
    path.write_text("def f():\n    return 2\n\nstate = []\n")
    assert load().f() == 2, "changed bytes are compiled again"


COUNTS_COMPILED = """
import sys


def compiled():
    return len(sys.modules["__main__"].COMPILED)
"""


def test_a_sandbox_loads_each_test_afresh_from_code_compiled_once(tmp_path):
    """Through the worker itself: two loads of the same file, one compiled code."""
    source = tmp_path / "hand-in" / "ch13_leases.py"
    source.parent.mkdir()
    source.write_text(COUNTS_COMPILED)
    (tmp_path / "scratch").mkdir()
    with Sandbox(source, scratch=[tmp_path / "scratch"], workdir=tmp_path / "work") as box:
        assert box.load(seconds=30).compiled() == 1
        assert box.load(seconds=30).compiled() == 1


def test_starting_a_sandbox_writes_the_bytecode_only_a_sandbox_imports(tmp_path, monkeypatch):
    """A sandboxed process may not write bytecode, so the host writes that of the modules only
    it imports (``sandbox/inside``) before it starts one, even with PYTHONDONTWRITEBYTECODE."""
    import importlib.util
    import shutil as shutil_

    from lucyshop.lab.sandbox import jail

    inside = Path(jail.__file__).with_name("inside")
    if not os.access(inside, os.W_OK):
        pytest.skip("the kit is read-only here: its bytecode is compiled in each process")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    shutil_.rmtree(inside / "__pycache__", ignore_errors=True)
    jail._inside_bytecode.cache_clear()
    source = tmp_path / "hand-in" / "ch13_leases.py"
    source.parent.mkdir()
    source.write_text("VALUE = 1\n")
    (tmp_path / "scratch").mkdir()
    with Sandbox(source, scratch=[tmp_path / "scratch"], workdir=tmp_path / "work") as box:
        assert box.load(seconds=30).VALUE == 1
    for module in inside.glob("*.py"):
        assert Path(importlib.util.cache_from_source(str(module))).is_file(), module.name
