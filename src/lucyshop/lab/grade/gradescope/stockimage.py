"""Prove the Gradescope zip on a bare image: Debian with no Python, setup.sh, one graded run.

    python -m lucyshop.lab.grade.gradescope.stockimage [--zip build/autograder.zip] [--fresh]
    [--keep]
    make autograder-proof

Gradescope builds its image by running the zip's ``setup.sh`` on Ubuntu 22.04, then runs
``run_autograder`` once per submission under a timeout (600 s by default) and a memory limit
(768 MB). This module does the same where it can be checked without Gradescope:

1. a minimal Debian root filesystem (``debootstrap --variant=minbase``, from the mirror the
   machine's apt already uses), kept as a tarball under ``build/stockimage/`` so reruns skip
   the download; it has no Python, so ``setup.sh`` must install everything itself;
2. the zip unpacked as ``/autograder/source`` and ``setup.sh`` run in it as root, with the
   image as the whole filesystem (``pivot_root``, as a container has it) of a PID and mount
   namespace of its own: nothing mounted or running outlives it;
3. the reference's three files handed in as ``/autograder/submission``, and ``run_autograder`` run
   under half a core and 768 MiB (a cgroup), timed, its peak memory taken from the cgroup and
   from the process tree's resident sizes (``--isolation user`` forces the sandbox's mode for
   a container without user namespaces);
4. ``results.json`` validated against ``grading/results.schema.json`` and its score checked to
   be the rubric's total; the figures written to ``evidence/gradescope-run.json``.

Reruns reuse the downloaded packages and built wheels (``build/stockimage/cache``); ``--fresh``
starts from nothing. Linux only, as root, with ``debootstrap`` and util-linux's ``unshare``.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from lucyshop.lab.evidence import receipts
from lucyshop.lab.grade import rubric as rubrics
from lucyshop.lab.grade.gradescope import autograder
from lucyshop.lab.loader import ROOT

SUITE = "bookworm"  # Debian 12: the suite whose mirror the kit's machines are set up with
BUILD = ROOT / "build" / "stockimage"
EVIDENCE = ROOT / "evidence" / "gradescope-run.json"
ENTER = autograder.TEMPLATES / "enter-image.sh"
TEMPLATES = (autograder.TEMPLATES / "setup.sh", autograder.TEMPLATES / "run_autograder")
RESULTS_SCHEMA = ROOT / "grading" / "results.schema.json"
SUBMISSION = tuple(
    ROOT / "solutions" / name for name in ("ch13_leases.py", "exercises.py", "ch13_postgres.py")
)
SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
# Certificate authorities this machine adds to Debian's (a network that re-signs TLS): copied
# into the image, where installing ca-certificates trusts them, so that pip reaches PyPI.
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CGROUPS = Path("/sys/fs/cgroup")
GRADESCOPE_MEMORY = 768 * 2**20  # bytes: Gradescope's default, a Docker limit of 768m
CPU_PERIOD_US = 100_000
DEBOOTSTRAP_SECONDS = 900.0
SETUP_SECONDS = 2400.0  # apt and pip, from cold
SAMPLE_SECONDS = 0.2  # between looks at the process tree's resident size
KILL_WAIT = 10.0
SCHEMA = "gradescope-run/1"
MODE_ENV = "LUCYSHOP_ISOLATION"  # lucyshop.lab.sandbox.jail's override of its own choice


class ProofError(RuntimeError):
    """The proof could not be run here (not the autograder failing it): says why."""


# ---------------------------------------------------------------- the image


def debian_mirror(sources: Iterable[Path] = SOURCES, suite: str = SUITE) -> str:
    """The URI of the first ``deb`` entry for ``suite`` in apt's sources (both formats)."""
    files: list[Path] = []
    for source in sources:
        if source.is_dir():
            files += sorted(p for p in source.iterdir() if p.suffix in (".list", ".sources"))
        elif source.is_file():
            files.append(source)
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        entries = _deb822(text) if path.suffix == ".sources" else _one_line(text)
        for types, uris, suites in entries:
            if "deb" in types and suite in suites and uris:
                return uris[0]
    named = ", ".join(map(str, files)) or "nothing"
    raise ProofError(f"no 'deb' entry for Debian {suite} in {named}: pass --mirror URL")


def _one_line(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    """``deb [options] URI SUITE COMPONENT...`` lines."""
    entries = []
    for line in text.splitlines():
        line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0])
        words = line.split()
        if len(words) >= 3:
            entries.append(([words[0]], [words[1]], [words[2]]))
    return entries


def _deb822(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    """Stanzas of ``Types:``, ``URIs:`` and ``Suites:`` fields, separated by blank lines."""
    entries = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, list[str]] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line:
                continue
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.split()
        if fields.get("enabled", ["yes"]) != ["no"]:
            entries.append(
                (fields.get("types", []), fields.get("uris", []), fields.get("suites", []))
            )
    return entries


def pristine(cache: Path, mirror: str, *, fresh: bool = False) -> Path:
    """The tarball of a bare ``debootstrap --variant=minbase`` root filesystem, made once."""
    tarball = cache / f"{SUITE}-minbase.tar"
    if tarball.is_file() and not fresh:
        return tarball
    work = cache / "debootstrap"
    remove_tree(work)
    print(f"stockimage: debootstrap --variant=minbase {SUITE} from {mirror}", flush=True)
    argv = ["debootstrap", "--variant=minbase", SUITE, str(work), mirror]
    done = subprocess.run(
        argv, check=False, capture_output=True, text=True, timeout=DEBOOTSTRAP_SECONDS
    )
    if done.returncode != 0:
        raise ProofError(f"debootstrap failed ({done.returncode}): {done.stdout[-2000:]}")
    partial = tarball.with_suffix(".tar.partial")
    tar = ["tar", "--numeric-owner", "--xattrs", "-C", str(work), "-cf", str(partial), "."]
    subprocess.run(tar, check=True, timeout=DEBOOTSTRAP_SECONDS)
    partial.replace(tarball)
    remove_tree(work)
    return tarball


def pythons_in(tarball: Path) -> list[str]:
    """The Python interpreters a root filesystem tarball holds (none in a minbase one)."""
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    return sorted(n for n in names if re.search(r"(^|/)usr/(local/)?bin/python[0-9.]*$", n))


def unpack(tarball: Path, root: Path, zip_path: Path, hand_in: Sequence[Path]) -> None:
    """A fresh root filesystem at ``root``: the image, the zip as /autograder/source, and the
    hand-in as /autograder/submission."""
    remove_tree(root)
    root.mkdir(parents=True)
    tar = ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-xf", str(tarball)]
    subprocess.run(tar, check=True, timeout=DEBOOTSTRAP_SECONDS)
    source = root / "autograder" / "source"
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(source)
    for name in ("setup.sh", "run_autograder"):
        (source / name).chmod(0o755)  # Gradescope keeps the zip's modes; extractall does not
    shutil.copy2(source / "run_autograder", root / "autograder" / "run_autograder")  # as it does
    submission = root / "autograder" / "submission"
    submission.mkdir(parents=True)
    for path in hand_in:
        shutil.copy2(path, submission / path.name)


def trust_local_cas(root: Path, cas: Path = LOCAL_CAS) -> list[str]:
    """Copy this machine's local certificate authorities into the image; return their names.

    Only the network of the machine running the proof needs them (Gradescope's does not):
    Debian's ca-certificates, which setup.sh installs, trusts what it finds in this folder.
    """
    found = sorted(p for p in cas.glob("*.crt") if p.is_file()) if cas.is_dir() else []
    inside = root / cas.relative_to("/")
    inside.mkdir(parents=True, exist_ok=True)
    for path in found:
        shutil.copy2(path, inside / path.name)
    return [path.name for path in found]


def remove_tree(path: Path) -> None:
    """Remove ``path``, refusing while anything is mounted inside it."""
    if not path.exists():
        return
    inside = [m.mountpoint for m in psutil.disk_partitions(all=True)]
    inside = [m for m in inside if Path(m).is_relative_to(path.resolve())]
    if inside:
        raise ProofError(f"{path} still has mounts inside it ({', '.join(inside)}): not removed")
    shutil.rmtree(path)


# ---------------------------------------------------------------- the limits


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


# ---------------------------------------------------------------- running inside


@dataclass
class Ran:
    command: list[str]
    exit_status: int | None  # None: stopped at the deadline
    seconds: float
    peak_tree_rss_bytes: int
    peak_processes: int
    log: Path


def in_image(
    root: Path,
    command: Sequence[str],
    *,
    timeout: float,
    log: Path,
    binds: Sequence[tuple[Path, str]] = (),
    quota: Quota | None = None,
) -> Ran:
    """Run ``command`` in the image ``root`` (its whole filesystem, in a PID and mount namespace
    of its own: ``enter-image.sh``) for at most ``timeout`` seconds; its output goes to ``log``
    and, line by line, to stdout."""
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private"]
    argv += ["--", "bash", str(ENTER), str(root), *(f"{host}:{inside}" for host, inside in binds)]
    argv += ["--", *command]
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=quota.join if quota and quota.groups else None,  # noqa: PLW1509
    )
    peak = _Peak(child.pid)
    with log.open("wb") as sink:
        copier = threading.Thread(target=_copy, args=(child.stdout, sink), daemon=True)
        copier.start()
        peak.start()
        try:
            status: int | None = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
            os.killpg(child.pid, signal.SIGKILL)  # the namespace's first process: all go
            child.wait(timeout=KILL_WAIT)
        finally:
            peak.stop()
            copier.join(timeout=KILL_WAIT)
    seconds = time.monotonic() - started
    return Ran(list(command), status, seconds, peak.rss, peak.processes, log)


def _copy(stream: IO[bytes], sink: IO[bytes]) -> None:
    for line in iter(stream.readline, b""):
        sink.write(line)
        sys.stdout.write("  | " + line.decode("utf-8", "replace"))
        sys.stdout.flush()


class _Peak(threading.Thread):
    """The largest summed resident size of a process and its descendants, sampled."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.rss, self.processes = pid, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_SECONDS):
            try:
                top = psutil.Process(self.pid)
                tree = [top, *top.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for process in tree:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.rss, self.processes = max(self.rss, total), max(self.processes, len(tree))

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=KILL_WAIT)


# ---------------------------------------------------------------- the proof


def check_results(path: Path, total: float) -> dict[str, Any]:
    """What ``results.json`` says, whether it follows Gradescope's schema, and whether its
    score is the rubric's ``total``."""
    from jsonschema import Draft202012Validator

    if not path.is_file():
        return {"present": False, "valid": False, "full_score": False, "problems": ["missing"]}
    document = json.loads(path.read_text(encoding="utf-8"))
    schema = json.loads(RESULTS_SCHEMA.read_text(encoding="utf-8"))
    problems = [e.message for e in Draft202012Validator(schema).iter_errors(document)]
    score = document.get("score")
    tests = document.get("tests", [])
    return {
        "present": True,
        "valid": not problems,
        "problems": problems[:10],
        "score": score,
        "max_score": total,
        "full_score": isinstance(score, int | float) and abs(score - total) < 0.005,
        "execution_time": document.get("execution_time"),
        "tests": len(tests),
        "failed_tests": [t.get("name") for t in tests if t.get("status") == "failed"],
    }


def kit_commit() -> dict[str, Any]:
    """The kit's commit (``make autograder-proof`` builds the zip from the same tree) and the
    files changed beyond it."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], check=False, capture_output=True, text=True, timeout=30
        )
        return done.stdout if done.returncode == 0 else ""

    # Porcelain lines are "XY path": the status's first column may be a space, kept.
    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line]
    return {"commit": git("rev-parse", "HEAD").strip() or None, "changed_files": changed}


def isolation(root: Path, log: Path, forced: str | None = None) -> str:
    """How the kit set up in the image isolates student code there (the sandbox's own choice,
    or ``forced``: bubblewrap, an unprivileged user, or none), or why that could not be asked."""
    python = "/autograder/source/kit/.venv/bin/python"
    ask = "from lucyshop.lab.sandbox.jail import describe; print(describe())"
    env = [f"{MODE_ENV}={forced}"] if forced else []
    ran = in_image(root, [*env, python, "-c", ask], timeout=60, log=log)
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    answer = lines[-1] if lines else "no answer"
    return answer if ran.exit_status == 0 else f"cannot tell ({ran.exit_status}): {answer}"


@dataclass
class Found:
    """What one proof saw, step by step (``evidence`` writes it down)."""

    mirror: str
    caches_reused: dict[str, bool]
    local_cas: list[str]
    pythons_before: list[str]
    extras: str
    timeout: float  # the zip's, Gradescope's autograder timeout: the run's wall limit
    setup: Ran
    pythons_after: list[str]
    isolation: str
    quota: Quota
    run: Ran | None  # None: setup.sh failed, so nothing was graded
    kernel: dict[str, Any]
    results: dict[str, Any]


def prove(args: argparse.Namespace) -> tuple[dict[str, Any], Found]:
    """Everything the module docstring lists: (provenance, what was found)."""
    if os.geteuid() != 0:
        raise ProofError("run as root: debootstrap, the namespaces and the cgroup need it")
    for tool in ("debootstrap", "unshare", "pivot_root", "tar"):
        if shutil.which(tool) is None:
            raise ProofError(f"{tool} is not installed (apt-get install debootstrap util-linux)")
    if not args.zip.is_file():
        raise ProofError(f"no {args.zip}: run make autograder first")
    cache, root = args.build / "cache", args.build / "root"
    if args.fresh:
        remove_tree(cache)
    record = receipts.provenance(
        command=["-m", "lucyshop.lab.grade.gradescope.stockimage", *args.argv],
        code=[Path(autograder.__file__), Path(__file__), ENTER, *TEMPLATES],
    )
    reused = {"pip": any((cache / "pip").glob("*")), "apt": any((cache / "apt").glob("*.deb"))}
    mirror = args.mirror or debian_mirror()
    tarball = pristine(args.build, mirror, fresh=args.fresh)
    before = pythons_in(tarball)
    unpack(tarball, root, args.zip, SUBMISSION)
    cas = trust_local_cas(root)
    binds = [(cache / "pip", "/root/.cache/pip"), (cache / "apt", "/var/cache/apt/archives")]
    extras = autograder.installed_extras(args.zip)
    timeout = autograder.built_timeout(args.zip)  # what Gradescope's timeout is to be set to
    print(f"stockimage: setup.sh (extras [{extras}]) in {root}", flush=True)
    setup = in_image(
        root,
        [*([f"PIP_CERT={IMAGE_BUNDLE}"] if cas else []), "bash", "/autograder/source/setup.sh"],
        timeout=args.setup_timeout,
        log=args.build / "setup.log",
        binds=binds,
    )
    after = sorted(p.name for p in (root / "usr" / "bin").glob("python3*"))
    sandbox = ""
    if setup.exit_status == 0:
        sandbox = isolation(root, args.build / "isolation.log", args.isolation)
    quota = Quota.make(args.cpu, args.memory, f"lucyshop-autograder-{os.getpid()}")
    run, kernel = None, {}
    try:
        if setup.exit_status == 0:
            print(f"stockimage: run_autograder, confined by {quota.mechanism}", flush=True)
            forced = [f"{MODE_ENV}={args.isolation}"] if args.isolation else []
            run = in_image(
                root,
                ["PYTHONUNBUFFERED=1", *forced, "/autograder/run_autograder"],
                timeout=timeout,
                log=args.build / "run.log",
                quota=quota,
            )
            kernel = quota.figures()
    finally:
        quota.remove()
    rubric = rubrics.load(root / "autograder" / "source" / "kit" / "grading" / "rubric.toml")
    results = check_results(root / "autograder" / "results" / "results.json", rubric.total)
    if not args.keep:
        remove_tree(root)
    found = Found(
        mirror,
        reused,
        cas,
        before,
        extras,
        timeout,
        setup,
        after,
        sandbox,
        quota,
        run,
        kernel,
        results,
    )
    return record, found


def evidence(args: argparse.Namespace, record: dict[str, Any], found: Found) -> dict[str, Any]:
    """The evidence document: the checks, the figures, the kit's commit and the provenance."""
    setup, run, kernel = found.setup, found.run, found.kernel
    peak = kernel.get("peak_bytes") or (run.peak_tree_rss_bytes if run else None)
    checks = {
        "setup_succeeded": setup.exit_status == 0,
        "finished_in_time": run is not None
        and run.exit_status == 0
        and run.seconds <= found.timeout,
        "memory_within_limit": peak is not None  # a cgroup's peak stops at its limit: below it
        and peak < args.memory
        and not kernel.get("oom_kills"),
        "quota_applied": found.quota.mechanism != "none",
        "results_valid": found.results["valid"],
        "full_score": found.results["full_score"],
    }
    return {
        "schema": SCHEMA,
        "passed": all(checks.values()),
        "checks": checks,
        "image": {
            "suite": SUITE,
            "variant": "minbase",
            "mirror": found.mirror,
            "pythons_before_setup": found.pythons_before,
            "pythons_after_setup": found.pythons_after,
            "isolation": found.isolation,
            "caches_reused": found.caches_reused,
            "local_cas_copied_in": found.local_cas,
        },
        "setup": {
            "extras": found.extras,
            "exit_status": setup.exit_status,
            "seconds": round(setup.seconds, 1),
            "timeout_seconds": args.setup_timeout,
        },
        "run": None
        if run is None
        else {
            "exit_status": run.exit_status,
            "seconds": round(run.seconds, 1),
            "peak_cgroup_bytes": kernel.get("peak_bytes"),
            "peak_tree_rss_bytes": run.peak_tree_rss_bytes,
            "peak_processes": run.peak_processes,
            "cpu_seconds": _rounded(kernel.get("cpu_seconds")),
            "throttled_periods": kernel.get("throttled_periods"),
            "limit_hits": kernel.get("limit_hits"),
            "oom_kills": kernel.get("oom_kills"),
            "quota": found.quota.describe(),
            "isolation_forced": args.isolation,
        },
        "limits": {
            "wall_seconds": found.timeout,
            "memory_bytes": args.memory,
            "cpu_cores": args.cpu,
        },
        "results": found.results,
        "kit": kit_commit(),
        "provenance": receipts.finish(record),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.grade.gradescope.stockimage",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("--zip", type=Path, default=autograder.DEFAULT_ZIP)
    parser.add_argument("--build", type=Path, default=BUILD, help="tarball, caches and logs")
    parser.add_argument("--evidence", type=Path, default=EVIDENCE)
    parser.add_argument("--mirror", help="a Debian mirror (default: apt's own, for bookworm)")
    parser.add_argument("--fresh", action="store_true", help="no tarball or caches kept")
    parser.add_argument("--keep", action="store_true", help="keep the root filesystem after")
    parser.add_argument("--setup-timeout", type=float, default=SETUP_SECONDS)
    parser.add_argument(
        "--isolation",
        choices=("bwrap", "user", "none"),
        help="force the sandbox's mode in run_autograder (default: the kit chooses, as on"
        " Gradescope; user is what a container without user namespaces gets)",
    )
    parser.add_argument("--cpu", type=float, default=0.5, help="cores (a CPU quota)")
    parser.add_argument("--memory", type=int, default=GRADESCOPE_MEMORY, help="bytes")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        record, found = prove(args)
    except ProofError as error:
        print(f"stockimage: {error}", file=sys.stderr)
        return 2
    document = evidence(args, record, found)
    receipts.write_receipt(args.evidence, document)
    print(json.dumps({k: document[k] for k in ("checks", "run", "results")}, indent=1))
    verdict = "PASSED" if document["passed"] else "FAILED"
    print(f"stockimage: {verdict}; evidence in {receipts.shown(args.evidence)}")
    return 0 if document["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
