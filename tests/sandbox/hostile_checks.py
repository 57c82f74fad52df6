"""Helpers of the hostile suite: a student's file made of stub bodies and a hostile file, one
real ``make check`` run of it, and what that run left behind.

The hostile files themselves are under ``hostile/``: each is real Python, appended to a
student's file, told what it needs (``PARAMS``) by the test that uses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from mutants import BY_NAME
from sandbox_files import ROOT, SOLUTIONS, STUBBED

from lucyshop.lab.check.guard import MARKER
from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.given.stubs import stub_nodes
from lucyshop.lab.sandbox import isolation
from lucyshop.lab.sandbox.jail import remove_tree

HOSTILE = Path(__file__).resolve().parent / "hostile"
LEARNER = ROOT / "learner"
STUB = re.compile(r"^( +)raise NotStarted\([^)]*\)$", re.MULTILINE)
SECRET_NAME = "LUCYSHOP_TEST_SECRET"
# Every hostile file runs only where something isolates it; a whole make check of one is slow.
ISOLATED = pytest.mark.skipif(
    isolation() == "none",
    reason="nothing isolates a student's file here: a hostile one would run with our rights",
)
MARKS = [pytest.mark.slow, ISOLATED]


def with_stubs(status: str) -> dict[str, str]:
    """The function rows of a file made ``with_bodies``: ``status`` for each of the learner's
    stubs, PASSING for each function the book gives whole."""
    return {name: status if name in STUBBED else "PASSING" for name in FUNCTIONS}


def hostile(name: str, **params: object) -> str:
    """The hostile file ``hostile/<name>.py``, told ``params``."""
    text = (HOSTILE / f"{name}.py").read_text(encoding="utf-8")
    line = "PARAMS = {}  # the test writes what this file is told here"
    assert text.count(line) == 1, name
    return text.replace(line, f"PARAMS = {params!r}")


def with_bodies(body: str, name: str = "ch13_leases.py") -> str:
    """The learner's stubs of ``name`` (the chapter file, or ``exercises.py``) with every
    ``raise NotStarted(...)`` replaced by ``body``: no function is a stub any more by its
    syntax, so every row's tests run."""
    text = (LEARNER / name).read_text(encoding="utf-8")
    replaced, count = STUB.subn(lambda stub: stub.group(1) + body, text)
    assert count == len(stub_nodes(LEARNER / name)) > 0, count
    return replaced


def hand_in(
    directory: Path,
    text: str,
    exercises: Path = LEARNER / "exercises.py",
    postgres: Path = LEARNER / "ch13_postgres.py",
) -> Path:
    """``text`` as ``directory/ch13_leases.py``, with ``exercises`` and ``postgres`` (exercise
    7) beside it (the stubs by default: the exercise rows are NOT STARTED and none of their
    tests runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    chapter = directory / "ch13_leases.py"
    chapter.write_text(text, encoding="utf-8")
    shutil.copyfile(exercises, directory / "exercises.py")
    shutil.copyfile(postgres, directory / "ch13_postgres.py")
    return chapter


def reference() -> str:
    return (SOLUTIONS / "ch13_leases.py").read_text(encoding="utf-8")


SPLIT = ("observe_check_in_its_own_transaction", "finish_check_in_its_own_transaction")


def split_writers() -> str:
    """The reference with the kit's two "holder check in its own transaction" mutants
    (``tests/mutants.py``): ``observe`` and ``finish`` check in one transaction and write in
    the next."""
    text = reference()
    for name in SPLIT:
        mutant = BY_NAME[name]
        assert text.count(mutant.old) == 1, name
        text = text.replace(mutant.old, mutant.new)
    return text


@contextmanager
def short_tmpdir() -> Iterator[Path]:
    """A short directory for a run's ``TMPDIR`` (a Unix socket's path must stay under 108
    bytes), removed afterwards with whatever a hostile file left in it."""
    path = Path(tempfile.mkdtemp(prefix="ch13h-", dir="/tmp"))
    try:
        yield path
    finally:
        remove_tree(path)


@dataclass
class Checked:
    status: int | None  # None: it did not end by its deadline (it was killed)
    data: dict
    output: str
    seconds: float
    marker: str
    peak_kib: int | None = None  # with measure=True: the run's largest process, KiB

    def rows(self) -> dict[str, dict]:
        return {row["label"]: row for row in self.data.get("rows", [])}

    def functions(self) -> dict[str, str]:
        return {label: row["status"] for label, row in self.rows().items() if label in FUNCTIONS}

    def everything(self) -> str:
        """What the run printed and wrote, as one text to search."""
        return self.output + json.dumps(self.data, ensure_ascii=False)


def run_check(
    path: Path,
    tmpdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    through_cat: bool = False,
    measure: bool = False,
) -> Checked:
    """``python -m lucyshop.lab.check --impl PATH --json FILE ARGS`` with ``tmpdir`` as its
    ``TMPDIR`` and a marker of our own in its environment (every process it starts carries
    it, so ``leftovers`` can find them); ``through_cat`` pipes its output through ``cat``;
    ``measure`` runs it under a parent that records the peak resident size of the largest
    process of the run (``RUSAGE_CHILDREN``: its processes and their sandboxes)."""
    target = tmpdir / "result.json"
    marker = uuid.uuid4().hex
    argv = [sys.executable, "-m", "lucyshop.lab.check", "--impl", str(path)]
    argv += ["--json", str(target), *args]
    peak = tmpdir / "peak-kib"
    if measure:  # the marker on the run alone: its sweep would end the measuring parent
        argv = [sys.executable, "-c", PEAK, str(peak), MARKER, marker, *argv]
    environment = os.environ | {"TMPDIR": str(tmpdir), MARKER: marker} | (env or {})
    if measure:
        environment.pop(MARKER)
    if through_cat:  # the marker on the run alone: its sweep would end the shell and cat
        script = 'set -o pipefail; env "$0=$1" "${@:2}" 2>&1 | cat'
        argv = ["bash", "-c", script, MARKER, marker, *argv]
        environment.pop(MARKER)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        status = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the run, and whatever holds its output
        output, _ = proc.communicate(timeout=30)
    seconds = time.monotonic() - started
    data = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else {}
    kib = int(peak.read_text()) if measure and peak.is_file() else None
    return Checked(status, data, output.decode("utf-8", "replace"), seconds, marker, kib)


# run_check(measure=True)'s parent: the make check run as its child, then the largest process's
# peak.
PEAK = (
    "import os, resource, subprocess, sys\n"
    "env = os.environ | {sys.argv[2]: sys.argv[3]}\n"
    "status = subprocess.call(sys.argv[4:], env=env)\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(status)\n"
)


def leftovers(marker: str | None, *needles: str, grace: float = 5.0) -> list[str]:
    """Processes still alive that carry ``marker`` in their environment or any of ``needles``
    in their command line (waiting up to ``grace`` seconds for them to go); each found one is
    killed, and described in the list."""
    deadline = time.monotonic() + grace
    while True:
        found = _alive(marker, needles)
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    described = []
    for proc in found:
        try:
            described.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
            proc.kill()
        except psutil.Error:
            continue
    return described


def _alive(marker: str | None, needles: tuple[str, ...]) -> list[psutil.Process]:
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in mine:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            command = " ".join(proc.cmdline())
            marked = marker is not None and proc.environ().get(MARKER) == marker
            if marked or any(needle in command for needle in needles):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def reference_lines(count: int = 12) -> list[str]:
    """Lines of the reference that appear nowhere in the stubs or the tests: one of them in a
    run's output means the reference's source got out."""
    elsewhere = (LEARNER / "ch13_leases.py").read_text(encoding="utf-8")
    elsewhere += "".join(
        p.read_text(encoding="utf-8") for t in ("tests", "spec") for p in (ROOT / t).rglob("*.py")
    )
    lines = []
    for line in reference().splitlines():
        text = line.strip()
        if len(text) >= 30 and text not in elsewhere and not text.startswith(("#", '"')):
            lines.append(text)
    return lines[:: max(1, len(lines) // count)][:count]


def du(path: Path) -> int:
    """Bytes in the regular files under ``path``."""
    total = 0
    for directory, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total
