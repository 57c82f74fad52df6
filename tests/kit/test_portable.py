"""The kit runs where there is no ``/proc`` (macOS): its questions about processes go to psutil
instead.

This module is the one place in the kit's code that names ``/proc``: it has to, to take it away.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIT_DIRS = ("src", "checkpoints", "spec", "tests", "learner", "solutions")
PROC = re.compile(r"""/proc\b|["']proc["']""")
# The one exception: bubblewrap's argument that mounts a sandbox's own /proc (Linux only, where
# bubblewrap is; it reads nothing), named once, in lucyshop/lab/sandbox/jail.py.
MOUNT = re.compile(r"""^PROC_MOUNT = \("--proc", "/proc"\)  # """)
# Linux-only questions with no psutil answer, each in one function that answers without /proc
# (an OSError there means "the system does not say"): a sandboxed process's pid in each PID
# namespace (bubblewrap, Linux only), and this process's own cgroup (cgroups, Linux only).
LINUX_ONLY = {
    "src/lucyshop/lab/checkpoint/shop.py": "namespace_pids",
    "src/lucyshop/lab/sandbox/host/cgroups.py": "_own",
}

# Run in a child, since an audit hook cannot be removed. Any open, listdir or scandir of a path
# under /proc raises PermissionError when the nearest caller outside the standard library is the
# kit's own code (a file under src/, spec/, tests/, checkpoints/, learner/, solutions/, or this
# script).
# psutil, a declared dependency in site-packages, may still read /proc: on Linux that is how it
# answers, and on macOS it asks the kernel (libproc, sysctl) instead. So the claim proved is the
# one a Mac needs: no line of the kit depends on /proc, only psutil does, and psutil is portable.
GUARD = """
import os, sys, sysconfig
from pathlib import Path

kit = tuple(d.rstrip(os.sep) + os.sep for d in sys.argv[1].split(",")) + (__file__,)
stdlib = (sysconfig.get_paths()["stdlib"], "<frozen")


def from_kit():
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(stdlib):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(kit)


def guard(event, args):
    if event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if isinstance(path, int) or path is None:
        return
    path = os.path.abspath(os.fsdecode(path))
    if (path == "/proc" or path.startswith("/proc/")) and from_kit():
        raise PermissionError(f"the kit itself read {path}")


sys.addaudithook(guard)

try:
    Path("/proc/self/stat").read_text()
except PermissionError:
    pass
else:
    sys.exit("the guard let the kit read /proc")
import psutil

assert psutil.Process().status() == psutil.STATUS_RUNNING  # psutil still may

import pytest

sys.exit(pytest.main(sys.argv[2:]))
"""


def guarded_pytest(
    tmp_path: Path, *args: str, kit: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess:
    """Run pytest on ``args`` in a child whose kit code (plus ``kit``) cannot read /proc."""
    script = tmp_path / "guard.py"
    script.write_text(GUARD)
    dirs = ",".join(str(d) for d in (*(ROOT / d for d in KIT_DIRS), *kit))
    return subprocess.run(
        [sys.executable, str(script), dirs, "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


LIVENESS = (  # the status report's tests that ask whether a worker's pid is alive
    "test_worker_liveness_comes_from_a_workers_file",
    "test_worker_liveness_from_a_workers_table",
    "test_without_pid_information_liveness_is_unknown",
)
PROBE = """from pathlib import Path


def test_scan():
    assert [p for p in Path('/proc').iterdir() if p.name.isdigit()]
"""


def test_the_process_checks_pass_with_proc_unreadable_to_the_kit(tmp_path):
    """The leftover-process fixture, every process helper and the status report's worker
    liveness, run with /proc taken away; beside them, the conftest's former /proc scan (as kit
    code) is refused, so the guard can fail."""
    probes = tmp_path / "probes"
    probes.mkdir()
    (probes / "test_scan.py").write_text(PROBE)
    result = guarded_pytest(
        tmp_path,
        "tests/runtime/test_process_queries.py",
        *(f"tests/runtime/test_status.py::{name}" for name in LIVENESS),
        "-rA",
        str(probes / "test_scan.py"),
        kit=(probes,),
    )
    out = result.stdout
    assert result.returncode == 1, out[-4000:] + result.stderr[-2000:]
    assert re.search(r"\b1 failed, \d+ passed", out), out[-2000:]
    for name in LIVENESS:  # each ran under the guard, and passed
        assert f"PASSED tests/runtime/test_status.py::{name}" in out, out[-2000:]
    assert "::test_scan - PermissionError: the kit itself read /proc" in out, out[-2000:]


HOSTILE = ROOT / "tests" / "sandbox" / "hostile"


def kit_files() -> list[Path]:
    return [
        path
        for directory in KIT_DIRS
        for path in sorted((ROOT / directory).rglob("*.py"))
        if ".venv" not in path.parts
        and path != Path(__file__).resolve()
        and not path.is_relative_to(HOSTILE)  # a hostile student's files, not the kit's
    ]


def linux_only_lines(path: Path, text: str) -> range:
    """The lines of the one function in ``path`` allowed to ask /proc (``LINUX_ONLY``)."""
    name = LINUX_ONLY.get(path.relative_to(ROOT).as_posix())
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return range(node.lineno, (node.end_lineno or node.lineno) + 1)
    return range(0)


def readers_of_proc() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in kit_files():
        text = path.read_text(encoding="utf-8")
        allowed = linux_only_lines(path, text)
        hits = [
            n
            for n, line in enumerate(text.splitlines(), 1)
            if PROC.search(line) and not MOUNT.match(line) and n not in allowed
        ]
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    return found


def test_no_kit_code_names_proc():
    """A grep: not in code, not in docstrings (a Mac has no /proc to describe)."""
    found = readers_of_proc()
    assert found == {}, f"/proc named at (file: lines) {found}"


def test_the_linux_only_exceptions_are_each_one_function(tmp_path):
    """Outside its named function, a file on the Linux-only list is held to the grep too."""
    for relative, name in LINUX_ONLY.items():
        text = (ROOT / relative).read_text(encoding="utf-8")
        assert linux_only_lines(ROOT / relative, text), f"{relative} has no {name}()"
        planted = text + '\n\nSTRAY = "/proc/self/stat"\n'
        allowed = linux_only_lines(ROOT / relative, planted)
        assert len(planted.splitlines()) not in allowed


def test_the_grep_finds_what_it_looks_for():
    assert PROC.search('Path(f"/proc/{pid}/stat")') and PROC.search("Path('/') / 'proc'")
    assert not PROC.search("processes = procs()") and not PROC.search("/process/")
