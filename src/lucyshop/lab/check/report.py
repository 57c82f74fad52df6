"""``make check``: every chapter-13 function NOT STARTED, FAILING or PASSING, then the checkpoint.

    python -m lucyshop.lab.check [--impl learner|solutions|PATH] [--no-checkpoint]
                                  [--no-measured] [--json FILE] [--test-timeout S] ...

The learner and exercise suites run in pytest children side by side (each measured exercise in
one of its own, and exercise 7, ``ch13_postgres.py`` on a real PostgreSQL server, in another);
the checkpoint runs beside them. Each row is one function (in the order of
``learner/ch13_leases.py``) or one exercise:

- NOT STARTED: its body is still the stub, read from the file's syntax alone (then none of
  its tests runs: the count says how many it has); a ``NotStarted`` raised by a written
  function is FAILING, and so is the checkpoint's NOT STARTED when no function is a stub;
- FAILING: every failing test, one line each (what was expected, what happened), with the
  command that reruns just that test;
- PASSING: every test of it passed, and as many ran as a separate collection finds;
- LEFT OUT: exercises 5 and 6 under ``--no-measured``. They run the measurement on the
  scripted stand-in (``lucyshop.lab.model.scripted``), never on timed real turns, so no
  row waits for a model or depends on how loaded the machine is. Also exercise 7 where
  PostgreSQL cannot run (the ``pg`` extra is not installed): its message says how to install it.

Bounded, whatever the file does. Output of every child goes to a file, never a pipe. A test
has 30 s (the measured exercises 120 s); past that it fails "timed out after 30 s in claim()",
and the function fails at once in the tests after it. A process that dies or hangs beyond
that is stopped and the rest of the suite rerun without it. A checkpoint case has 60 s from
its own start, the checkpoint 600 s from its own start (``Limits``; the ``--*-timeout``
options and a rubric's ``[limits]`` change them). Every child carries a marker in its
environment, and every process with it is ended before the check returns.

Trusting nothing the student's code reports: the student's functions run only in sandboxed
worker processes (``lucyshop.lab.sandbox``); this process, the pytest children and the
checkpoint's parent never import the file. What crosses back (a value, an exception's type, a
path, a size, the moment of a reply) is data to check, never a fact:

- The checkpoint's outcome is ``lucyshop.lab.checkpoint.judge``'s, computed here from the
  evidence and the shop and supplier-ledger files the checkpoint kept (``watcher``), read as
  bounded regular files; its exit status is ignored.
- A row whose function is still the stub (read here from the file's syntax tree) is NOT
  STARTED; an exception that says it is ``NotStarted`` never makes it so. A row with fewer
  results than a separate ``--collect-only`` run finds is FAILING.
- The kit's files (tests, checkpoints, src, solutions, Makefile, pyproject.toml) are read
  before and compared after; anything changed is named, and where nothing isolates the file
  (no sandbox) the check FAILS.

Exit status (for scripts): 0 nothing failing and every function and the checkpoint passed
(exercises may be not started); 1 something FAILING (a row, the checkpoint,
or the kit's files changed); 2 the file could not be checked at all (no such file, a syntax
error, an import that fails); 3 nothing failing, but work not started yet. ``make check``
treats 3 as success, so unfinished work is not a make error.

``--json FILE`` writes the schema ``ch13-check/1`` (rows, checkpoint cases, the summary line,
the whole feedback; ``results``). ``timings()`` measures a warm check and one printed rerun, for
the bench. The rooms of this package: ``subjects`` (what is checked), ``suites`` (the pytest
children), ``watcher`` (the checkpoint beside them), ``table`` (the rows and what is printed),
``results`` (the result and its JSON), ``guard`` (bounds, the marker sweep, the kit's files),
``plugin.collect`` (the pytest plugin in each child); this module puts them together.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from lucyshop.lab.check import suites
from lucyshop.lab.check.guard import (
    DEFAULT_LIMITS,
    LOAD_TIMEOUT,
    MARKER,
    KitFiles,
    Limits,
    OwnGroupChild,
    kit_changes,
    new_marker,
    sweep,
)
from lucyshop.lab.check.results import CheckpointResult, Result, write_json
from lucyshop.lab.check.subjects import SUITES, all_stubs, not_started, set_aside, shown, subject
from lucyshop.lab.check.table import (
    build_rows,
    checkpoint_lines,
    exit_status,
    row_text,
    summary_line,
    table_lines,
)
from lucyshop.lab.check.watcher import CHECKPOINT, Checkpoint
from lucyshop.lab.loader import ENV, ROOT, ImplementationError, add_impl_option, impl_path
from lucyshop.lab.sandbox import CallTimedOut, Sandbox, WorkerDied, describe, isolation
from lucyshop.lab.sandbox.jail import begin_check, end_check
from lucyshop.lab.statuses import CheckpointStatus, Status


class CannotCheck(Exception):
    """The implementation cannot be checked at all: one line says why (exit 2)."""


def check_loadable(path: Path, tmp: Path, timeout: float = LOAD_TIMEOUT) -> None:
    """Refuse (CannotCheck) a file that does not compile, or cannot be imported in the
    sandbox, or ends its process while importing."""
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError as error:
        raise CannotCheck(
            f"{shown(path)} does not compile: line {error.lineno}: {error.msg}"
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise CannotCheck(f"{shown(path)} is not Python source: {error}") from None
    (tmp / "load").mkdir()
    with Sandbox(path, scratch=[tmp / "load"], workdir=tmp / "loader", shown=shown(path)) as box:
        try:
            box.load(seconds=timeout)
        except CallTimedOut:
            raise CannotCheck(
                f"{shown(path)} did not finish importing within {timeout:g}s"
            ) from None
        except WorkerDied as died:
            why = f"; the sandbox said: {died.said}" if died.said else ""
            raise CannotCheck(
                f"{shown(path)} ended its process while being imported"
                f" (os._exit, or a signal, at import?){why}"
            ) from None
        except (Exception, SystemExit) as error:  # noqa: BLE001 (rebuilt from the sandbox)
            name = getattr(error, "remote_type", type(error).__name__)
            if name in ("SystemExit", "KeyboardInterrupt"):
                raise CannotCheck(
                    f"{shown(path)} ended its process while being imported ({name} at import)"
                ) from None
            raise CannotCheck(f"{shown(path)} cannot be imported: {name}: {error}") from None


# ---------------------------------------------------------------- one check


def check(
    spec: str, *, checkpoint: bool = True, measured: bool = True, limits: Limits = DEFAULT_LIMITS
) -> Result:
    """Check one file: print the feedback as it goes and return everything it found.

    ``measured=False`` leaves out exercises 5 and 6 (their rows say LEFT OUT): a check of the
    functions alone, without the minute of real model turns.
    """
    result = Result(impl=spec)
    # A marker handed down (the grader's) lets whoever started this check sweep its children
    # even when it had to kill this process first.
    marker, kit = os.environ.get(MARKER) or new_marker(), KitFiles(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="lucyshop-check-"))  # under $TMPDIR
    begin_check(tmp)
    status = CheckpointStatus.SKIPPED
    try:
        path = impl_path(spec)
        result.impl = spec if spec in ("learner", "solutions") else shown(path)
        env = os.environ | {ENV: str(path)}
        check_loadable(path, tmp, limits.load)
        status = run_check(result, path, env, tmp, marker, checkpoint, measured, limits)
    except (ImplementationError, CannotCheck) as error:
        result.error = str(error)
    finally:
        sweep(marker)
        end_check()
        changed = kit.changed()
        shutil.rmtree(tmp, ignore_errors=True)
    tampered = bool(changed) and isolation() == "none"  # else the file could not write them
    if tampered:
        result.say(f"make check: FAILING: the kit's own files changed: {', '.join(changed)}")
    elif changed:
        result.say(
            "make check: note: kit files changed while the check ran (not by the checked"
            f" file, whose sandbox cannot write them): {', '.join(changed)}"
        )
    if result.error is not None:
        result.exit, result.summary = 2, f"make check: {result.error}"
    else:
        result.exit = exit_status(result.rows, status, tampered)
        result.summary = summary_line(result.rows, status)
        result.say()
    result.say(result.summary)
    return result


def say_where(result: Result) -> None:
    """The first lines: what is checked, how it is isolated, and kit files edited by hand."""
    result.say(f"make check: {result.impl}; {describe()}")
    if edited := kit_changes(ROOT):
        result.say(
            "note: these kit files differ from the commit, and every check runs with them:"
            f" {', '.join(edited)} (git diff shows how; git checkout -- FILE puts one back)"
        )
    result.say()


def run_check(
    result: Result,
    path: Path,
    env: dict[str, str],
    tmp: Path,
    marker: str,
    with_checkpoint: bool,
    measured: bool,
    limits: Limits,
) -> CheckpointStatus:
    """Run the suites and the checkpoint side by side, print the table; the checkpoint status."""
    say_where(result)
    stubs = all_stubs(path)
    aside = set_aside(path, measured, stubs)
    paths, parts = suites.plan(stubs, aside)
    running = None
    if with_checkpoint and (ROOT / CHECKPOINT).is_file():
        running = Checkpoint(path, env, tmp, marker, limits)
    collecting = suites.pristine_counts(tmp, marker, paths)
    run = suites.run_side_by_side(path, env, tmp, marker, parts, limits)
    counts = suites.read_counts(collecting)
    if run.problem:
        raise CannotCheck(f"the learner suite could not run ({run.problem})")
    result.rows = build_rows(
        run.results, result.impl, stubs=stubs, counts=counts, stopped=run.stopped, aside=aside
    )
    for line in table_lines(result.rows):
        result.say(line)
    if running is not None:
        result.checkpoint = running.read(stubs)
        python = shown(Path(sys.executable))  # the venv's: the line works without activating it
        command = f"{python} {CHECKPOINT} --impl {shlex.quote(result.impl)}"
        for line in checkpoint_lines(result.checkpoint, command):
            result.say(line)
    elif with_checkpoint:
        result.checkpoint = CheckpointResult()
        result.say()
        result.say(f"checkpoint: {CHECKPOINT} is not there; skipped")
    return result.checkpoint.status


# ---------------------------------------------------------------- one row, for a notebook


def check_row(label: str, spec: str | None = None, limits: Limits = DEFAULT_LIMITS) -> str:
    """One row of the table, for a notebook's check cell: its status and every failing test."""
    path = impl_path(spec)
    row = subject(label)
    stubs = all_stubs(path)
    stub = next((s for s in row.stubs if s in stubs), None)
    if stub is not None:  # still the stub, read from its syntax: there is nothing to run yet
        return f"{label}: {Status.NOT_STARTED}\n  {not_started(stubs[stub])}"
    aside = set_aside(path, True, stubs).get(label)
    if aside is not None:  # exercise 7 without its file or PostgreSQL
        return f"{label}: {aside[0]}\n  {aside[1]}"
    marker = new_marker()
    with tempfile.TemporaryDirectory(prefix="lucyshop-row-") as tmp:
        try:
            run = suites.run_suites(
                path,
                os.environ | {ENV: str(path)},
                Path(tmp),
                marker,
                [f"{row.directory}/{module}.py" for module in row.modules],
                limits,
            )
        finally:
            sweep(marker)
    found = build_rows(run.results, spec, stubs=stubs, counts=None, stopped=run.stopped, only=label)
    return row_text(found[0])


def timings(spec: str) -> dict[str, float]:
    """Seconds for one whole check and for one printed rerun (for ``make bench``)."""
    start = time.monotonic()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        check(spec)
    whole = time.monotonic() - start
    nodeid = f"{SUITES[0]}/test_claim.py::test_oldest_first"
    argv = [sys.executable, "-m", "pytest", nodeid, "--impl", spec, "-q", "-p", "pytest_timeout"]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        child = OwnGroupChild(
            argv,
            cwd=ROOT,
            env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            log=Path(tmp) / "rerun.log",
            marker=new_marker(),
        )
        suites.wait(child, LOAD_TIMEOUT)
    return {"check_seconds": round(whole, 2), "rerun_seconds": round(time.monotonic() - start, 2)}


# ---------------------------------------------------------------- main

SECONDS = {  # each --NAME-timeout option: what it bounds
    "test": "one test",
    "case": "one checkpoint case",
    "load": "importing the file",
    "suite": "the whole suite",
    "checkpoint": "the whole checkpoint",
}


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.check",
        description="Check a chapter-13 file: each function's status, then the checkpoint.",
    )
    add_impl_option(found)
    found.add_argument("--no-checkpoint", action="store_true", help="show the table only")
    found.add_argument(
        "--no-measured",
        action="store_true",
        help="leave out exercises 5 and 6 (a minute of real model turns)",
    )
    found.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    for name, what in SECONDS.items():
        found.add_argument(
            f"--{name}-timeout",
            type=float,
            default=getattr(Limits, name),
            metavar="S",
            help=f"seconds for {what} (default %(default)g)",
        )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    options = parser()
    args = options.parse_args(argv)
    spec = args.impl
    try:
        limits = Limits(**{name: getattr(args, f"{name}_timeout") for name in SECONDS})
    except ValueError as error:
        options.error(str(error))
    result = check(
        spec, checkpoint=not args.no_checkpoint, measured=not args.no_measured, limits=limits
    )
    if args.json:
        write_json(result, args.json)
    return result.exit
