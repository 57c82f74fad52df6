"""The bounded process helpers: real child processes, real deadlines, nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lucyshop.lab.services import processes
from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    is_stopped,
    python_argv,
    wait_exit,
    wait_for_file,
    wait_until,
    write_ready,
)

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_write_ready_replaces_the_file_through_a_temporary_in_the_same_directory(
    tmp_path, monkeypatch
):
    target = tmp_path / "ready.json"
    target.write_text('{"old": true}')
    renames = []
    real_replace = os.replace

    def spy(src, dst):
        renames.append((Path(src), Path(dst), Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(processes.os, "replace", spy)

    write_ready(target, {"port": 8123, "pid": 42})

    ((src, dst, text),) = renames
    assert dst == target and src.parent == tmp_path and src.name != target.name
    assert text == target.read_text()
    assert wait_for_file(target, timeout=0) == {"port": 8123, "pid": 42}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready.json"]


def test_write_ready_leaves_no_temporary_when_the_data_cannot_be_written(tmp_path):
    with pytest.raises(TypeError):
        write_ready(tmp_path / "ready.json", {"bad": object()})

    assert list(tmp_path.iterdir()) == []


def test_wait_for_file_returns_data_written_later(tmp_path):
    target = tmp_path / "ready.json"
    writer = threading.Timer(0.1, write_ready, (target, {"port": 1}))
    writer.start()
    try:
        assert wait_for_file(target, timeout=5) == {"port": 1}
    finally:
        writer.join()


def test_wait_for_file_keeps_waiting_while_the_json_is_incomplete(tmp_path):
    target = tmp_path / "ready.json"
    target.write_text('{"port": ')
    threading.Timer(0.1, target.write_text, ('{"port": 2}',)).start()

    assert wait_for_file(target, timeout=5) == {"port": 2}


def test_ready_file_timeout_raises_within_the_deadline_and_leaves_no_process(tmp_path):
    target = tmp_path / "never.json"
    with pytest.raises(TimeoutError) as raised, SharedGroupChildren() as children:
        proc = children.spawn(SLEEPER)
        started = time.monotonic()
        try:
            wait_for_file(target, timeout=0.5, proc=proc)
        finally:
            waited = time.monotonic() - started

    assert 0.5 <= waited < 1.5
    assert str(target) in str(raised.value) and "0.50s" in str(raised.value)
    assert proc.returncode == -signal.SIGTERM
    assert gone(proc.pid)


def test_a_process_that_exits_before_ready_is_reported_with_its_stderr_file(tmp_path):
    log_path = tmp_path / "child.log"
    code = "import sys; sys.stderr.write('cannot open the database\\n'); sys.exit(3)"
    with SharedGroupChildren() as children:
        with open(log_path, "wb") as log:
            proc = children.spawn(python(code), stderr=log)
        started = time.monotonic()
        with pytest.raises(RuntimeError) as raised:
            wait_for_file(tmp_path / "ready.json", timeout=10, proc=proc)

    assert time.monotonic() - started < 5
    message = str(raised.value)
    assert "status 3" in message and "cannot open the database" in message


def test_a_process_that_exits_before_ready_is_reported_with_its_stderr_pipe(tmp_path):
    code = "import sys; sys.stderr.write('port already taken\\n'); sys.exit(2)"
    with SharedGroupChildren() as children:
        proc = children.spawn(python(code), stderr=subprocess.PIPE)
        with pytest.raises(RuntimeError) as raised:
            wait_for_file(tmp_path / "ready.json", timeout=10, proc=proc)

    assert "status 2" in str(raised.value) and "port already taken" in str(raised.value)


def test_wait_until_returns_the_first_truthy_value():
    calls = []

    def third_time() -> list[int] | None:
        calls.append(1)
        return calls if len(calls) == 3 else None

    assert wait_until(third_time, timeout=5, interval=0.001, what="three calls") == [1, 1, 1]


def test_wait_until_times_out_naming_what_it_waited_for():
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"waited 0\.20s for the moon"):
        wait_until(lambda: 0, timeout=0.2, what="the moon")

    # gave up at its deadline, not never: the upper bound leaves a loaded machine 2 s of slack
    assert 0.2 <= time.monotonic() - started < 0.2 + 2.0


def test_wait_exit_returns_the_status_or_times_out():
    with SharedGroupChildren() as children:
        quick = children.spawn(python("raise SystemExit(7)"))
        slow = children.spawn(SLEEPER)

        assert wait_exit(quick, timeout=10) == 7
        with pytest.raises(TimeoutError, match=f"process {slow.pid} still running"):
            wait_exit(slow, timeout=0.1)
        assert slow.poll() is None


def test_children_end_a_stopped_child_with_sigterm_after_sigcont():
    with SharedGroupChildren() as children:
        proc = children.spawn(SLEEPER)
        os.kill(proc.pid, signal.SIGSTOP)
        wait_until(lambda: is_stopped(proc.pid), timeout=5, what="the child to stop")
        started = time.monotonic()

    # Without SIGCONT the SIGTERM would stay pending and only SIGKILL (after 2 s) would end it.
    assert proc.returncode == -signal.SIGTERM
    assert time.monotonic() - started < processes.TERM_GRACE_SECONDS
    assert gone(proc.pid)


def test_children_kill_a_child_that_ignores_sigterm_when_the_block_raises(tmp_path):
    ready = tmp_path / "ready.json"
    code = (
        "import signal, sys, time\n"
        "from lucyshop.lab.services.processes import write_ready\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "write_ready(sys.argv[1], {})\n"
        "time.sleep(30)\n"
    )
    with pytest.raises(RuntimeError, match="the block failed"), SharedGroupChildren() as children:
        proc = children.spawn([*python(code), str(ready)])
        wait_for_file(ready, timeout=10, proc=proc)
        started = time.monotonic()
        raise RuntimeError("the block failed")

    waited = time.monotonic() - started
    assert proc.returncode == -signal.SIGKILL
    assert processes.TERM_GRACE_SECONDS <= waited < processes.TERM_GRACE_SECONDS + 3
    assert gone(proc.pid)


def test_children_end_every_child_on_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt), SharedGroupChildren() as children:
        procs = [children.spawn(SLEEPER) for _ in range(3)]
        raise KeyboardInterrupt

    assert [proc.returncode for proc in procs] == [-signal.SIGTERM] * 3
    assert all(gone(proc.pid) for proc in procs)


def test_end_stops_one_child_early_and_leaves_the_others():
    with SharedGroupChildren() as children:
        first, second = children.spawn(SLEEPER), children.spawn(SLEEPER)

        assert children.end(first) == -signal.SIGTERM
        assert second.poll() is None
        assert children.end(first) == -signal.SIGTERM  # ending it again is harmless

    assert second.returncode == -signal.SIGTERM


def test_children_read_no_terminal_input():
    with SharedGroupChildren() as children:
        proc = children.spawn(
            python("import sys; print(repr(sys.stdin.read()))"), stdout=subprocess.PIPE
        )
        out, _ = proc.communicate(timeout=10)

    assert out.strip() == b"''"


def test_python_argv_runs_the_module_through_the_blocker_by_default():
    assert python_argv("lucyshop.supplier", "--port", "0") == [
        sys.executable,
        "-m",
        "lucyshop.lab.blocked",
        "lucyshop.supplier",
        "--port",
        "0",
    ]
    assert python_argv("lucyshop.supplier", "--port", "0", blocked=False) == [
        sys.executable,
        "-m",
        "lucyshop.supplier",
        "--port",
        "0",
    ]
