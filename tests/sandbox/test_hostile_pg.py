"""A hostile ch13_postgres.py (exercise 7) against ``make check`` and exercise 7's checkpoint:
its code runs in the sandbox and reaches PostgreSQL only as a role of its own, through a relay's
socket.

One real ``make check`` run of a student's directory whose chapter file and exercises are the
stubs (their rows run nothing) and whose ``ch13_postgres.py`` is ``hostile/pg_escape.py``: at
its first call it tries every route to the reference and out of its scratch, through its process
and through the database (the superuser's login, ``pg_read_file``, ``lo_import``,
``COPY ... PROGRAM``, ``COPY TO``, making itself a superuser). What it reads of the reference
it executes, so a route that worked would make the row pass; what it writes carries a token we
look for.

One real ``make check`` of the reference ``ch13_postgres.py`` with ``hostile/pg_fill.py``
appended: it fills the server's disk every way its role may try (a temporary table, its own
tables, a sort's spill, large objects), and after each ``observe`` writes rows that compress
to nothing but not on the wire, for the trusted side to read back. The server's
directory grew by 2.8 GB and the trusted pytest to 2.9 GB (issue 47): now the directory must
grow by under 1 GiB, the run's processes stay under 1 GiB, and the row say the trusted side
did not fetch what it was left.

And one real run of exercise 7's checkpoint on a ``ch13_postgres.py`` that does nothing and, at
import, makes every case pass wherever it can reach the checkpoint's code, and writes the
files a correct run keeps beside every case directory it may write
(``hostile/pg_forge_checkpoint.py``). When the checkpoint loaded that file in its own process,
behind the in-process blocker, both cases passed; in a sandbox per case, read by the judge from
the files the trusted side kept, both must fail.
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from hostile_checks import (
    LEARNER,
    MARKS,
    du,
    hand_in,
    hostile,
    leftovers,
    run_check,
    short_tmpdir,
)
from sandbox_files import ROOT, SOLUTIONS
from test_hostile_wire import PEAK_BYTES, measured_check

from lucyshop.lab.check.subjects import PG_EXERCISE
from lucyshop.lab.checkpoint.cases import ON_POSTGRES
from lucyshop.lab.checkpoint.launch import checkpoint_command
from lucyshop.lab.services import postgres
from lucyshop.lab.services.processes import processes_mentioning

pytestmark = [
    *MARKS,
    pytest.mark.skipif(postgres.missing() is not None, reason=f"{postgres.missing()}"),
]

FAST = ("--no-measured", "--no-checkpoint", "--test-timeout=30")
ROUTES = (
    *("own", "mine", "file", "su", "authid", "escalate", "pgfile", "lo", "prog"),
    *("copyto", "progto", "kit", "relay", "snoop"),
)


def reference_lines(count: int = 12) -> list[str]:
    """Lines of the reference ch13_postgres.py that appear in neither the stubs nor the tests."""
    elsewhere = (LEARNER / "ch13_postgres.py").read_text(encoding="utf-8")
    elsewhere += "".join(
        p.read_text(encoding="utf-8") for t in ("tests", "spec") for p in (ROOT / t).rglob("*.py")
    )
    lines = []
    for line in (SOLUTIONS / "ch13_postgres.py").read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if len(text) >= 30 and text not in elsewhere and not text.startswith(("#", '"')):
            lines.append(text)
    assert lines
    return lines[:: max(1, len(lines) // count)][:count]


def test_a_hostile_ch13_postgres_reaches_neither_the_reference_nor_outside_its_scratch(tmp_path):
    token = f"hostile-pg-{uuid.uuid4().hex[:12]}"
    with short_tmpdir() as tmpdir:
        text = hostile("pg_escape", token=token, root=str(ROOT), tmp=str(tmpdir))
        chapter = hand_in(tmp_path / "student", (LEARNER / "ch13_leases.py").read_text())
        chapter.with_name("ch13_postgres.py").write_text(text, encoding="utf-8")
        checked = run_check(chapter, tmpdir, *FAST)
        written = [tmpdir / f"pg-{token}", ROOT / "learner" / f"pg-{token}"]
        written += [Path("/tmp") / f"pg-{token}", Path("/tmp") / f"pg-prog-{token}"]
        landed = [str(path) for path in written if path.exists()]
        left = leftovers(checked.marker, str(tmpdir))
    for path in written:  # should one have landed, it goes
        path.unlink(missing_ok=True)
    rows = checked.rows()
    assert rows[PG_EXERCISE]["status"] == "FAILING", checked.output[-3000:]
    others = {row["status"] for label, row in rows.items() if label != PG_EXERCISE}
    # the stubs (and the functions the book gives them), and --no-measured
    assert others <= {"NOT STARTED", "PASSING", "LEFT OUT"}, others
    message = rows[PG_EXERCISE]["failures"][0]["message"]
    for route in ROUTES:
        assert f" {route}=" in message, message  # tried ...
    assert " own=ok " in message and " mine=ok " in message, message  # ... from a working start
    for route in ROUTES[2:]:
        assert f" {route}=no" in message or f" {route}=none" in message, message  # ... in vain
    assert landed == [], f"written outside the sandbox's scratch: {landed}"
    shown = checked.everything()
    assert [line for line in reference_lines() if line in shown] == []
    assert left == [], left


def test_a_ch13_postgres_that_forges_the_checkpoint_passes_no_case(tmp_path):
    with short_tmpdir() as tmpdir:
        chapter = hand_in(tmp_path / "student", (LEARNER / "ch13_leases.py").read_text())
        cases = {case.name: case.number for case in ON_POSTGRES}
        forger = hostile("pg_forge_checkpoint", cases=cases)
        chapter.with_name("ch13_postgres.py").write_text(forger, encoding="utf-8")
        keep = tmpdir / "keep"
        done = subprocess.run(
            checkpoint_command(chapter, keep=keep, postgres=True),
            env=os.environ | {"TMPDIR": str(tmpdir)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=ROOT,
        )
        kept = {str(p): p.read_bytes() for p in keep.rglob("*-kept/**/*") if p.is_file()}
        left = processes_mentioning(str(tmpdir))
    assert done.returncode == 1, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert [line.split()[:2] for line in said] == [
        ["FAILING", str(case.number)] for case in ON_POSTGRES
    ], done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("checkpoint FAILING"), done.stdout
    assert [path for path, data in kept.items() if b"forged" in data] == []
    assert left == [], left


@contextmanager
def server_growth() -> Iterator[dict[str, int]]:
    """The most any PostgreSQL server started below this process grew its directory (from
    the first time it was seen), sampled every half second: ``{"bytes": ...}``."""
    found = {"bytes": 0}
    first: dict[Path, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            for proc in psutil.process_iter():
                try:
                    command = proc.cmdline()
                    ours = os.getpid() in {parent.pid for parent in proc.parents()}
                except psutil.Error:
                    continue
                if not command or Path(command[0]).name != "postgres" or "-D" not in command:
                    continue
                if not ours:
                    continue
                root = Path(command[command.index("-D") + 1]).parent
                size = du(root)
                first.setdefault(root, size)
                found["bytes"] = max(found["bytes"], size - first[root])

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        yield found
    finally:
        done.set()
        watcher.join(10)


def test_exercise_7_fills_neither_the_servers_disk_nor_the_trusted_sides_memory(tmp_path):
    text = (SOLUTIONS / "ch13_postgres.py").read_text() + hostile(
        "pg_fill", rows=200, megabytes=1200, seconds=8
    )
    with short_tmpdir() as tmpdir, server_growth() as grown:
        chapter = hand_in(tmp_path / "student", (LEARNER / "ch13_leases.py").read_text())
        chapter.with_name("ch13_postgres.py").write_text(text, encoding="utf-8")
        checked, peak = measured_check(
            chapter, tmpdir, "--no-measured", "--no-checkpoint", "--test-timeout=90"
        )
        left = leftovers(checked.marker, str(tmpdir))
    rows = checked.rows()
    assert rows[PG_EXERCISE]["status"] == "FAILING", checked.output[-3000:]
    messages = [failure["message"] for failure in rows[PG_EXERCISE]["failures"]]
    assert any("the trusted side does not fetch" in m for m in messages), messages
    assert grown["bytes"] < 1 << 30, f"the server's directory grew by {grown['bytes'] >> 20} MiB"
    assert peak < PEAK_BYTES, f"the run's processes peaked at {peak >> 20} MiB"
    assert left == [], left
