"""Questions about other processes (alive, stopped, descendants, by marker), on real children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from lucyshop.lab.services.processes import (
    SharedGroupChildren,
    descendants,
    is_stopped,
    processes_mentioning,
    wait_for_file,
    wait_until,
)
from lucyshop.pids import pid_alive

SLEEP = "import time; time.sleep(30)"
PARENT_OF_A_SLEEPER = (
    "import subprocess, sys, time\n"
    "from lucyshop.lab.services.processes import write_ready\n"
    f"child = subprocess.Popen([sys.executable, '-c', {SLEEP!r}])\n"
    "write_ready(sys.argv[1], {'grandchild': child.pid})\n"
    "time.sleep(30)\n"
)


def test_descendants_reach_grandchildren_and_forget_them_once_ended(tmp_path):
    ready = tmp_path / "ready.json"
    with SharedGroupChildren() as children:
        child = children.spawn([sys.executable, "-c", PARENT_OF_A_SLEEPER, str(ready)])
        grandchild = wait_for_file(ready, timeout=20, proc=child)["grandchild"]
        try:
            assert {child.pid, grandchild} <= descendants(os.getpid())
            assert descendants(child.pid) == {grandchild}
        finally:
            os.kill(grandchild, signal.SIGKILL)
            wait_until(lambda: not pid_alive(grandchild), timeout=10, what="the grandchild")
        assert descendants(child.pid) == set()

    assert child.pid not in descendants(os.getpid())
    assert descendants(child.pid) == set()  # a pid that no longer exists has none


def test_a_zombie_is_neither_alive_nor_a_descendant():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Not reaped yet (nothing polls it), so the kernel still lists it, as a zombie.
        wait_until(lambda: not pid_alive(proc.pid), timeout=20, what="the child to exit")
        assert proc.pid in {p.pid for p in psutil.Process().children()}
        assert proc.pid not in descendants(os.getpid())
    finally:
        proc.wait(timeout=10)
    assert not pid_alive(proc.pid)


def test_pid_alive_for_this_process_and_for_one_owned_by_another_user():
    assert pid_alive(os.getpid())
    assert pid_alive(1)  # init: alive whoever we are


def test_is_stopped_follows_sigstop_and_sigcont():
    with SharedGroupChildren() as children:
        proc = children.spawn([sys.executable, "-c", SLEEP])
        assert not is_stopped(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        wait_until(lambda: is_stopped(proc.pid), timeout=10, what="the child to stop")
        os.kill(proc.pid, signal.SIGCONT)
        wait_until(lambda: not is_stopped(proc.pid), timeout=10, what="the child to continue")
        assert pid_alive(proc.pid)
    assert not is_stopped(proc.pid)


def test_processes_mentioning_finds_a_marker_in_a_command_line_until_it_ends(tmp_path):
    marker = str(tmp_path / "marker")
    assert processes_mentioning(marker) == []
    with SharedGroupChildren() as children:
        proc = children.spawn([sys.executable, "-c", SLEEP, marker])
        (found,) = wait_until(
            lambda: processes_mentioning(marker), timeout=10, what="the marked child"
        )
        assert found.startswith(f"{proc.pid}: ") and found.endswith(marker)
    assert processes_mentioning(marker) == []
