"""The two process helpers do what their names say about process groups.

``lab.check.guard.OwnGroupChild`` runs a student's code in a session and process group of its
own, so that one ``killpg`` ends it and whatever it started, and never signals ``make check``.
``services.processes.SharedGroupChildren`` keeps the kit's own workers in our process group,
so that a Ctrl-C or a kill of the group reaches them too. Each test reads the real child's
group and session from the system, so swapping either choice fails one of them.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from lucyshop.lab.check.guard import OwnGroupChild, new_marker
from lucyshop.lab.services.processes import SharedGroupChildren, descendants
from lucyshop.pids import pid_alive

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
# A parent that starts a grandchild in its own group, writes the grandchild's pid, and waits.
PARENT = [
    sys.executable,
    "-c",
    (
        "import subprocess, sys, time\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(grandchild.pid, flush=True)\n"
        "time.sleep(60)\n"
    ),
]


def test_own_group_child_leads_a_session_and_group_of_its_own(tmp_path):
    child = OwnGroupChild(
        SLEEP, cwd=tmp_path, env=dict(os.environ), log=tmp_path / "child.log", marker=new_marker()
    )
    try:
        pid = child.proc.pid
        assert os.getpgid(pid) == pid, "it leads a process group of its own"
        assert os.getsid(pid) == pid, "it leads a session of its own"
        assert os.getpgid(pid) != os.getpgrp(), "it is not in ours"
    finally:
        child.proc.kill()
        child.kill()


def test_own_group_child_kill_ends_what_it_started_in_its_group(tmp_path):
    log = tmp_path / "parent.log"
    child = OwnGroupChild(PARENT, cwd=tmp_path, env=dict(os.environ), log=log, marker=new_marker())
    grandchild = None
    try:
        deadline = time.monotonic() + 30
        while not log.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int(log.read_text().split()[0])
        assert os.getpgid(grandchild) == child.proc.pid, "the grandchild stays in the child's group"
        child.kill()
        deadline = time.monotonic() + 10
        while pid_alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(grandchild), "one kill of the group ended the grandchild too"
    finally:  # whatever failed above, nothing is left running
        if grandchild is not None and pid_alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)
        child.proc.kill()
        child.kill()


def test_shared_group_children_stay_in_our_process_group_and_session():
    with SharedGroupChildren() as children:
        proc = children.spawn(SLEEP)
        assert os.getpgid(proc.pid) == os.getpgrp(), "it shares our process group"
        assert os.getsid(proc.pid) == os.getsid(0), "and our session"
        assert proc.pid in descendants(os.getpid())
