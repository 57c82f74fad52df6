"""The one engine behind every check: ``run(path) -> Result``.

``make check`` (``python -m lucyshop.lab.check``, and so the child each ``make grade`` hand-in
gets), a notebook's ``check("claim")`` (13d's of one exercise-7 function too, by its row in
``subjects.PG_ROWS``) and ``make bench`` all call ``run``, and no other code runs the suites
or the checkpoint for them. A whole check runs the learner and exercise suites in pytest
children side by side, with the checkpoint beside them, and prints the table as it goes;
``only=LABEL`` runs the tests of that one row (a notebook's check), with neither the
checkpoint nor the kit's files watched. ``echo=False`` keeps the lines in the
result without printing them.

The student's functions run only in sandboxed worker processes (``lucyshop.lab.sandbox``):
this process, the pytest children and the checkpoint's parent never import the file, and what
crosses back is data to check. A row is NOT STARTED by the file's syntax alone, PASSING only
when as many tests gave a result as pytest collected for it; the checkpoint's outcome
is the judge's, read from the files it kept (``watcher``). The kit's own files are read before
and compared after; a change where nothing isolates the file FAILS the check. Bounded,
whatever the file does: the import, each test, each checkpoint case, the suite and the
checkpoint have deadlines (``Limits``; the ``--*-timeout`` options and a rubric's ``[limits]``
change them), every child's output goes to a file, and every process carrying the check's
marker is ended before ``run`` returns.

Exit status: 0 every function and the checkpoint passed (exercises may be not started); 1
something FAILING; 2 the file could not be checked at all (no such file, a syntax error, an
import that fails); 3 nothing failing, but work not started yet. A row beyond the book
(``subjects.BEYOND``) is shown and graded but changes none of these.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from lucyshop import IMPL_ENV
from lucyshop.lab.check import suites
from lucyshop.lab.check.guard import (
    DEFAULT_LIMITS,
    MARKER,
    KitFiles,
    Limits,
    kit_changes,
    new_marker,
    sweep,
)
from lucyshop.lab.check.results import CheckpointResult, Result, Row
from lucyshop.lab.check.subjects import all_stubs, set_aside, shown, subject
from lucyshop.lab.check.table import (
    build_rows,
    checkpoint_lines,
    exit_status,
    row_text,
    summary_line,
    table_lines,
)
from lucyshop.lab.check.watcher import Checkpoint
from lucyshop.lab.checkpoint.launch import SCRIPT
from lucyshop.lab.loader import ROOT, ImplementationError, impl_path
from lucyshop.lab.sandbox import CallTimedOut, Sandbox, WorkerDied, describe, isolation
from lucyshop.lab.sandbox.jail import begin_check, end_check, remove_tree
from lucyshop.lab.services.limits import LOAD_SECONDS
from lucyshop.lab.statuses import CheckpointStatus


class CannotCheck(Exception):
    """The implementation cannot be checked at all: one line says why (exit 2)."""


def run(
    spec: str | None,
    *,
    checkpoint: bool = True,
    measured: bool = True,
    limits: Limits = DEFAULT_LIMITS,
    only: str | None = None,
    echo: bool = True,
) -> Result:
    """Check the chapter file ``spec`` (``learner``, ``solutions`` or a path; None: the one
    ``$LEASES_IMPL`` names) and return everything found, printing it as it goes when ``echo``.

    ``measured=False`` leaves out exercises 5 and 6 (their rows say LEFT OUT); ``only=LABEL``
    checks that one row alone.
    """
    result = Result(impl=str(spec), echo=echo)
    if only is not None:
        return _one_row(result, spec, only, limits)
    # A marker handed down (the grader's) lets whoever started this check sweep its children
    # even when it had to kill this process first.
    marker, kit = os.environ.get(MARKER) or new_marker(), KitFiles(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="lucyshop-check-"))  # under $TMPDIR
    begin_check(tmp)
    status = CheckpointStatus.SKIPPED
    try:
        path = _resolve(result, spec)
        env = children_env(path)
        check_loadable(path, tmp, limits.load)
        status = _whole(result, path, env, tmp, marker, checkpoint, measured, limits)
    except (ImplementationError, CannotCheck) as error:
        result.error = str(error)
    finally:
        sweep(marker)
        end_check()
        changed = kit.changed()
        remove_tree(tmp)
    tampered = bool(changed) and isolation() == "none"  # else the file could not write them
    if tampered:
        result.say(f"make check: FAILING: the kit's own files changed: {', '.join(changed)}")
    elif changed:
        result.say(
            "make check: note: kit files changed while the check ran (not by the checked"
            f" file, whose sandbox cannot write them): {', '.join(changed)}"
        )
    _conclude(result, status, tampered)
    return result


def children_env(path: Path) -> dict[str, str]:
    """The environment of a check's children: ours, naming the file checked, and caching
    bytecode even where ``PYTHONDONTWRITEBYTECODE`` is set (a container's habit). A check
    starts about seventy Python processes that import the same kit and spec modules, which
    would each compile them again."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    return env | {IMPL_ENV: str(path)}


def _resolve(result: Result, spec: str | None) -> Path:
    """The file ``spec`` names; ``result.impl`` becomes how the printed commands name it."""
    path = impl_path(spec)
    result.impl = spec if spec in ("learner", "solutions") else shown(path)
    return path


def _conclude(result: Result, status: CheckpointStatus, tampered: bool) -> None:
    """The exit status and the summary line, from the rows and the checkpoint alone."""
    if result.error is not None:
        result.exit, result.summary = 2, f"make check: {result.error}"
    else:
        result.exit = exit_status(result.rows, status, tampered)
        result.summary = summary_line(result.rows, status)
        result.say()
    result.say(result.summary)


def check_loadable(path: Path, tmp: Path, timeout: float = LOAD_SECONDS) -> None:
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


# ---------------------------------------------------------------- the whole check


def say_where(result: Result) -> None:
    """The first lines: what is checked, how it is isolated, and kit files edited by hand."""
    result.say(f"make check: {result.impl}; {describe()}")
    if edited := kit_changes(ROOT):
        result.say(
            "note: these kit files differ from the commit, and every check runs with them:"
            f" {', '.join(edited)} (git diff shows how; git checkout -- FILE puts one back)"
        )
    result.say()


def _whole(
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
    if with_checkpoint and (ROOT / SCRIPT).is_file():
        running = Checkpoint(path, env, tmp, marker, limits)
    collecting = suites.pristine_counts(tmp, marker, paths) if paths else None
    ran = suites.run_side_by_side(path, env, tmp, marker, parts, limits)
    counts = ran.counts  # each run module's tests, as its child collected them
    if collecting is not None:  # and those of the rows still a stub, which no child ran
        counts |= suites.read_counts(collecting) or {}
    if ran.problem:
        raise CannotCheck(f"the learner suite could not run ({ran.problem})")
    result.rows = build_rows(
        ran.results, result.impl, stubs=stubs, counts=counts, stopped=ran.stopped, aside=aside
    )
    for line in table_lines(result.rows):
        result.say(line)
    if running is not None:
        result.checkpoint = running.read(stubs)
        python = shown(Path(sys.executable))  # the venv's: the line works without activating it
        command = f"{python} {SCRIPT} --impl {shlex.quote(result.impl)}"
        for line in checkpoint_lines(result.checkpoint, command):
            result.say(line)
    elif with_checkpoint:
        result.checkpoint = CheckpointResult()
        result.say()
        result.say(f"checkpoint: {SCRIPT} is not there; skipped")
    return result.checkpoint.status


# ---------------------------------------------------------------- one row, for a notebook


def _one_row(result: Result, spec: str | None, label: str, limits: Limits) -> Result:
    """The row ``label`` alone: a stub's from its syntax (nothing runs), a row set aside with
    its reason, else from its own test modules. Its text (``row_text``) is the feedback."""
    try:
        path = _resolve(result, spec)
    except ImplementationError as error:
        result.error = str(error)
        _conclude(result, CheckpointStatus.SKIPPED, False)
        return result
    row, ran = _row(result, path, label, limits)
    result.rows = [row]
    for line in row_text(row, ran=ran).split("\n"):
        result.say(line)
    result.exit = exit_status(result.rows, CheckpointStatus.SKIPPED, False)
    result.summary = summary_line(result.rows, CheckpointStatus.SKIPPED)
    return result


def _row(result: Result, path: Path, label: str, limits: Limits) -> tuple[Row, bool]:
    """The row ``label`` of ``path``, and whether its tests ran: none run for a stub (read
    from its syntax) or a row set aside (exercise 7 without its file or PostgreSQL)."""
    subject_of = subject(label)
    stubs = all_stubs(path)
    aside = set_aside(path, True, stubs)
    outcomes: dict[str, dict[str, Any]] = {}
    stopped = None
    ran = label not in aside and not any(stub in stubs for stub in subject_of.stubs)
    if ran:
        marker = new_marker()
        with tempfile.TemporaryDirectory(prefix="lucyshop-row-") as tmp:
            try:
                found = suites.run_suites(
                    path,
                    children_env(path),
                    Path(tmp),
                    marker,
                    [f"{subject_of.directory}/{module}.py" for module in subject_of.modules],
                    limits,
                )
            finally:
                sweep(marker)
        outcomes, stopped = found.results, found.stopped
    rows = build_rows(
        outcomes, result.impl, stubs=stubs, counts=None, stopped=stopped, aside=aside, only=label
    )
    return rows[0], ran
