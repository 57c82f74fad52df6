"""What the proof reads of the machine it measures on: its busy CPU-seconds and its cores.

A figure of CPU-seconds here is the whole machine's, not one process tree's rusage: a check's
sandboxes, servers and workers are not all waited for up to whoever measures (one whole
``make check``: 29.3 CPU-s by process accounting, 19.4 by its rusage). So measure on a quiet
machine; inside a container the figure is the host's.
"""

from __future__ import annotations

import psutil

from lucyshop.lab.grade.classroom import default_jobs


def machine_cpu() -> float:
    """CPU-seconds the whole machine has been busy since it booted: user, nice, system, irq and
    softirq time of every core (idle, I/O wait and steal left out; a Mac has the first three)."""
    times = psutil.cpu_times()
    return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))


def cores() -> int:
    """The cores this process may run on (make grade's default jobs less the one it adds)."""
    return default_jobs() - 1
