"""Hostile students against ``make check``: forged rows, a forged checkpoint, the reference.

Each test is one real hostile file (``hostile/``), appended to a student's file whose stubs do
no real work (the functions the book gives stay whole), run through ``make check`` as a
student's file is. What got through before the sandbox (issue 28) must not: no PASSING row and
no ``checkpoint PASSING`` for code that does nothing, no line of the reference in anything the
run prints or keeps, and no process of the run alive after it.

The planted files, the FIFOs and links, the daemon, the secrets, the escapes and the disk fill
are in ``test_hostile_kit.py``; a class with a hostile classmate in ``test_hostile_grade.py``.
"""

from __future__ import annotations

from hostile_checks import (
    MARKS,
    hand_in,
    hostile,
    leftovers,
    reference_lines,
    run_check,
    short_tmpdir,
    with_bodies,
    with_stubs,
)
from sandbox_files import STUBBED

from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.checkpoint.judge import CASES

pytestmark = MARKS

# Short deadlines: nothing here hangs on purpose, and every failing test fails at once.
FAST = ("--no-measured", "--test-timeout=15", "--case-timeout=30", "--checkpoint-timeout=240")


def test_skips_and_a_patched_pytest_forge_no_passing_row(tmp_path):
    """Every function raises a skip (``unittest.SkipTest`` or ``pytest.skip``); at import the
    file rebinds pytest's report class and the kit's outcome writer, registers an ``atexit``
    handler and leaves a daemon, both appending "passed" records to every outcomes file they
    find. Every stub's row must be FAILING (the functions the book gives pass as they are)."""
    with short_tmpdir() as tmpdir:
        text = with_bodies("raise _skip()") + hostile("forge_rows", tmp=str(tmpdir))
        checked = run_check(hand_in(tmp_path, text), tmpdir, *FAST, "--no-checkpoint")
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    assert checked.functions() == with_stubs("FAILING"), checked.functions()
    percentile = checked.rows()["percentile"]
    assert percentile["passed"] == 0, percentile
    assert all("Skip" in f["message"] for f in percentile["failures"]), percentile["failures"]
    given, stubbed = len(FUNCTIONS) - len(STUBBED), len(STUBBED)
    assert checked.data["summary"].startswith(f"{given}/16 functions PASSING, {stubbed} FAILING")
    assert left == [], left


def test_a_file_that_forges_the_checkpoints_files_gets_no_checkpoint_pass(tmp_path):
    """Every function returns None. At import the file rewrites the checkpoint's case list and
    the judge's rules where it can reach them, and a thread keeps writing the shop files, the
    supplier ledgers and an evidence file of a run that passed every case, wherever its
    sandbox may write (and above it). The checkpoint must not pass, nor any of its cases."""
    with short_tmpdir() as tmpdir:
        cases = {case.name: case.number for case in CASES}
        text = with_bodies("return None") + hostile(
            "forge_checkpoint", tmp=str(tmpdir), cases=cases
        )
        checked = run_check(hand_in(tmp_path, text), tmpdir, *FAST)
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    checkpoint = checked.data["checkpoint"]
    assert checkpoint["status"] == "FAILING", checkpoint
    assert [case["passed"] for case in checkpoint["cases"]] == [False] * len(CASES), checkpoint
    assert "checkpoint PASSING" not in checked.output
    assert not any(checked.functions()[name] == "PASSING" for name in STUBBED)
    assert left == [], left


def test_no_route_reaches_the_reference(tmp_path):
    """At import, once per sandboxed process: ``os.open`` with ``dir_fd``, ``subprocess`` from
    a thread, ``_posixsubprocess.fork_exec``, a ``multiprocessing`` spawn child, and the blob
    in ``.git``. Whatever it read would be executed (its functions become the reference's);
    every function's error says what each route found. No stub's row may pass, each route must have
    been tried and found nothing, and no line of the reference may appear anywhere."""
    with short_tmpdir() as tmpdir:
        text = with_bodies("raise _NotYet()") + hostile("reach_reference", tmp=str(tmpdir))
        checked = run_check(hand_in(tmp_path, text), tmpdir, *FAST, "--no-checkpoint")
        left = leftovers(checked.marker, str(tmpdir))
    assert checked.status == 1, checked.output[-3000:]
    assert checked.functions() == with_stubs("FAILING"), checked.functions()
    message = checked.rows()["percentile"]["failures"][0]["message"]
    for route in ("dir_fd", "inherited_fd", "thread", "fork_exec", "multiprocessing", "git"):
        assert f"{route}=" in message, message  # tried ...
        assert f"{route}=READ" not in message, message  # ... and found nothing
    shown = checked.everything()
    assert [line for line in reference_lines() if line in shown] == []
    assert left == [], left
