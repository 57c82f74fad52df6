"""The limits the graded run is held to: half a core and Gradescope's memory, as a cgroup.

Gradescope runs ``run_autograder`` under a CPU share and a memory limit; ``Quota`` makes the
same limits here (cgroup v2, else v1), puts the run's first process in them, reads back what
the kernel counted (peak memory, OOM kills, CPU time, throttling) and removes them. Where no
cgroup can be made it says why, and the proof records the run as unconfined. Apart from the
image and the run because it is the only part that touches ``/sys/fs/cgroup``.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

CGROUPS = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass
class Quota:
    """Half a core and Gradescope's memory for one process tree, as a cgroup (v2 or v1).

    ``mechanism`` is ``none`` (and ``why_not`` says why) where no cgroup can be made here; the
    run then goes unconfined, and the evidence says so.
    """

    cpu: float
    memory: int
    mechanism: str = "none"
    why_not: str = ""
    groups: dict[str, Path] = field(default_factory=dict)  # controller -> its directory

    @classmethod
    def make(cls, cpu: float, memory: int, name: str) -> Quota:
        quota = cls(cpu, memory)
        try:
            if (CGROUPS / "cgroup.controllers").is_file():
                quota._make_v2(name)
            else:
                quota._make_v1(name)
        except OSError as error:
            quota.remove()
            quota.why_not = f"cannot make a cgroup under {CGROUPS}: {error}"
            quota.mechanism = "none"
        return quota

    def _make_v2(self, name: str) -> None:
        (CGROUPS / "cgroup.subtree_control").write_text("+cpu +memory")
        group = CGROUPS / name
        group.mkdir()
        self.groups = {"unified": group}
        (group / "cpu.max").write_text(f"{round(self.cpu * CPU_PERIOD_US)} {CPU_PERIOD_US}")
        (group / "memory.max").write_text(str(self.memory))
        if (group / "memory.swap.max").exists():
            (group / "memory.swap.max").write_text("0")
        self.mechanism = "cgroup v2"

    def _make_v1(self, name: str) -> None:
        mounts = {}
        for part in psutil.disk_partitions(all=True):
            if part.fstype == "cgroup":
                for controller in ("cpu", "cpuacct", "memory"):
                    if controller in part.opts.split(","):
                        mounts.setdefault(controller, Path(part.mountpoint))
        if not {"cpu", "memory"} <= set(mounts):
            raise OSError(errno.ENOENT, "no cgroup v1 cpu and memory hierarchies mounted")
        for controller, mount in mounts.items():
            group = mount / name
            if group not in self.groups.values():
                group.mkdir()
            self.groups[controller] = group
        cpu = self.groups["cpu"]
        (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(round(self.cpu * CPU_PERIOD_US)))
        memory = self.groups["memory"]
        (memory / "memory.limit_in_bytes").write_text(str(self.memory))
        if (memory / "memory.memsw.limit_in_bytes").exists():
            (memory / "memory.memsw.limit_in_bytes").write_text(str(self.memory))
        self.mechanism = "cgroup v1"

    def join(self) -> None:
        """Put the calling process in every group (a child's ``preexec_fn``, before exec)."""
        for group in dict.fromkeys(self.groups.values()):
            (group / "cgroup.procs").write_text(str(os.getpid()))

    def figures(self) -> dict[str, Any]:
        """Peak memory, OOM kills, CPU-seconds and throttled periods the kernel counted."""
        if self.mechanism == "cgroup v2":
            group = self.groups["unified"]
            cpu = _keyed(group / "cpu.stat")
            events = _keyed(group / "memory.events")
            return {
                "peak_bytes": _number(group / "memory.peak"),
                "limit_hits": events.get("max"),
                "oom_kills": events.get("oom_kill"),
                "cpu_seconds": cpu.get("usage_usec", 0) / 1e6,
                "throttled_periods": cpu.get("nr_throttled"),
            }
        if self.mechanism == "cgroup v1":
            memory, cpu = self.groups["memory"], self.groups["cpu"]
            usage = self.groups.get("cpuacct")
            return {
                "peak_bytes": _number(memory / "memory.max_usage_in_bytes"),
                "limit_hits": _number(memory / "memory.failcnt"),
                "oom_kills": _keyed(memory / "memory.oom_control").get("oom_kill"),
                "cpu_seconds": _number(usage / "cpuacct.usage") / 1e9 if usage else None,
                "throttled_periods": _keyed(cpu / "cpu.stat").get("nr_throttled"),
            }
        return {"peak_bytes": None, "limit_hits": None, "oom_kills": None, "cpu_seconds": None}

    def describe(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "why_not": self.why_not or None,
            "cpu_cores": self.cpu,
            "cpu_quota_us": round(self.cpu * CPU_PERIOD_US),
            "cpu_period_us": CPU_PERIOD_US,
            "memory_limit_bytes": self.memory if self.mechanism != "none" else None,
        }

    def remove(self) -> None:
        """Remove the groups (empty once the run's PID namespace is gone; bounded retries)."""
        for group in dict.fromkeys(self.groups.values()):
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY:
                        raise
                    time.sleep(0.1)
        self.groups = {}


def _number(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _keyed(path: Path) -> dict[str, int]:
    """``name value`` lines (cpu.stat, memory.events, memory.oom_control) as a dict."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.split() for line in lines)
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
