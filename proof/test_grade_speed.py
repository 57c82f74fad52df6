"""How long a class takes to grade (``lucyshop.proof.bench.speed``, the bench's ``grading``
section): its CPU-seconds are the machine's (``lucyshop.proof.machine``), and its projection
to a class of 200."""

from __future__ import annotations

import subprocess
import sys
import time

from lucyshop.proof import machine
from lucyshop.proof.bench import speed


def test_the_speed_report_projects_a_class_of_200():
    figures = speed.projection(count=8, seconds=400.0, cpu=256.0)
    assert figures["cpu_seconds_per_student"] == 32.0
    assert figures["wall_seconds_per_student"] == 50.0
    assert figures["projected_seconds_for_200"] == 10_000
    assert figures["projected_seconds_for_200_cpu_bound"] == round(32 * 200 / machine.cores())


def test_children_cpu_counts_a_finished_childs_cpu():
    before = speed.children_cpu()
    busy = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    subprocess.run([sys.executable, "-c", busy], check=True, timeout=60)
    assert speed.children_cpu() - before >= 0.35


def test_machine_cpu_counts_a_process_no_parent_waited_for(tmp_path):
    """A grandchild left to init (as a check leaves processes it ends by their group): the
    grader's rusage never sees its CPU, the machine's figure does."""
    done = tmp_path / "done"
    grandchild = (
        "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
        f"open({str(done)!r}, 'w').close()\n"
    )
    parent = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
    busy, waited = machine.machine_cpu(), speed.children_cpu()
    subprocess.run([sys.executable, "-c", parent], check=True, timeout=60)
    deadline = time.monotonic() + 60
    while not done.exists():
        assert time.monotonic() < deadline, "the grandchild never finished"
        time.sleep(0.05)
    assert machine.machine_cpu() - busy >= 0.35
    assert speed.children_cpu() - waited < 0.3, "rusage should miss the orphan's 0.4 CPU-s"
