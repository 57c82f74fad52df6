"""``make check``: every chapter-13 function NOT STARTED, FAILING or PASSING, then the checkpoint.

    python -m lucyshop.lab.check [--impl learner|solutions|PATH] [--no-checkpoint]
                                  [--no-measured] [--json FILE] [--test-timeout S] ...

The learner and exercise suites run in pytest children side by side (each measured exercise in
one of its own, and exercise 7, ``ch13_postgres.py`` on a real PostgreSQL server, in another);
the checkpoint runs beside them. Each row is one function (in the order of
``learner/ch13_leases.py``) or one exercise:

- NOT STARTED: its own ``NotStarted`` stopped a test, or its body is still the stub (then
  none of its tests runs: the count says how many it has);
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

Trusting nothing the student's code reports:

- The checkpoint's verdict is ``lucyshop.lab.checkpoint.judge``'s, computed in this process (which
never
  imports the student's file) from the evidence and the shop and supplier-ledger files the
  checkpoint kept. Its exit status is ignored.
- The learner table is read from outcomes the pytest child wrote, in the same process as the
  student's code, so it is resisted, not proved: a row whose function is still the stub (read
  here from the file's syntax tree) is NOT STARTED whatever the child said; a row with fewer
  results than a separate ``--collect-only`` run finds is FAILING; the reference blocker
  refuses the student's frames starting processes, loading native code, writing the kit's
  files and replacing the blocker's code. A file that does real work and also rebinds pytest's
  or the collector's methods could still forge its own rows: the checkpoint is the check to
  trust for a grade.
- The kit's files (tests, checkpoints, src, solutions, Makefile, pyproject.toml) are read before
  and compared after; anything changed is put back, named, and the check FAILS.

Exit status (for scripts): 0 nothing failing and every function and the checkpoint passed
(exercises may be not started); 1 something FAILING (a row, the checkpoint,
or the kit's files changed); 2 the file could not be checked at all (no such file, a syntax
error, an import that fails); 3 nothing failing, but work not started yet. ``make check``
treats 3 as success, so unfinished work is not a make error.

``--json FILE`` writes the schema ``ch13-check/1`` (rows, checkpoint cases, the summary line,
the whole feedback). ``timings()`` measures a warm check and one printed rerun, for the bench.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lucyshop import validate
from lucyshop.lab.check.collect import LEARNER_TIMEOUT, deadline_of
from lucyshop.lab.check.guard import (
    MARKER,
    KitFiles,
    OwnGroupChild,
    disk_usage,
    kit_changes,
    new_marker,
    sweep,
)
from lucyshop.lab.checkpoint import judge
from lucyshop.lab.given.stubs import functions_in, is_stub_node, stub_section
from lucyshop.lab.loader import ENV, ROOT, SOLUTIONS, ImplementationError, impl_path
from lucyshop.lab.sandbox import CallTimedOut, Sandbox, WorkerDied, describe, isolation
from lucyshop.lab.services.postgres import missing_for_tests as postgres_missing

SCHEMA = "ch13-check/1"
# Every chapter-13 function, in the order of learner/ch13_leases.py, with its test module.
FUNCTIONS: tuple[str, ...] = (
    "percentile",
    "false_expiry_share",
    "shortest_lease",
    "detection_delay",
    "outlive_curve",
    "fenced",
    "open_worker_shop",
    "Claim.worker_id",
    "enqueue",
    "claim",
    "assert_current",
    "observe",
    "finish",
    "recover_once",
    "reconcile",
    "cancel",
)
# Exercise 7: the chapter's leases on PostgreSQL, in ch13_postgres.py beside the chapter file.
# Its functions share the chapter's names, so its stubs are named ch13_postgres.<function>.
PG_FILE = "ch13_postgres.py"
PG_FUNCTIONS = ("claim", "assert_current", "observe", "finish")
PG_STUBS = tuple(f"{Path(PG_FILE).stem}.{name}" for name in PG_FUNCTIONS)
PG_MODULES = tuple(f"test_pg_{name}" for name in PG_FUNCTIONS)  # tests/postgres's others: the kit's
PG_EXERCISE = "exercise 7"
# The exercise book's answers (learner/exercises.py), each with its check modules and its stubs,
# then exercise 7.
EXERCISES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("exercise 1", ("test_exercise_1",), ("exercise_1_reuse_owner_label",)),
    ("exercise 2", ("test_exercise_2",), ("exercise_2_cancel_while_delayed",)),
    ("exercise 3", ("test_exercise_3",), ("observe_without_fence", "exercise_3_remove_one_fence")),
    ("exercise 4", ("test_exercise_4",), ("exercise_4_sessions_vs_ceiling",)),
    ("exercise 5", ("test_exercise_5",), ("renew", "keep_renewing", "exercise_5_renewal")),
    ("exercise 6", ("test_exercise_6",), ("records_message", "exercise_6_records")),
    (PG_EXERCISE, PG_MODULES, PG_STUBS),
)
MEASURED = ("exercise 5", "exercise 6")  # a measurement, run on the scripted stand-in
LEFT_OUT = ("LEFT OUT", "left out by --no-measured")
SUITES = ("tests/learner", "tests/exercises", "tests/postgres")
SUITE_OF = {PG_EXERCISE: SUITES[2]}  # an exercise's suite, when not tests/exercises
CHECKPOINT = Path("checkpoints") / "ch13_worker_recovery.py"
SUITE_TIMEOUT = 600.0  # the whole suite, reruns included
CHECKPOINT_TIMEOUT = 600.0  # from the checkpoint's own start
CASE_TIMEOUT = 60.0  # one checkpoint case
GRACE = 10.0  # past a test's own deadline before its process is stopped
LOAD_TIMEOUT = 60.0
MAX_RESTARTS = 8
CHECKPOINT_LINES = 12
POLL = 0.1
DISK_LIMIT = 256 * 1024 * 1024  # what one check's sandboxes may write to their scratch
WEIGH_EVERY = 0.25  # seconds between two weighings of the scratch
# What a printed rerun loads: the kit's conftest and pytest-timeout, no other plugin (seconds).
RERUN_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"


@dataclass(frozen=True)
class Limits:
    """How long each part of one check may take, in seconds.

    The defaults are ``make check``'s. A rubric (``[limits]``) may change them for a class, and
    the kit's own tests shorten them so that a hang costs seconds, not minutes.
    """

    test: float = LEARNER_TIMEOUT  # one learner or exercise test (the measured ones: 300 s)
    case: float = CASE_TIMEOUT  # one checkpoint case
    load: float = LOAD_TIMEOUT  # importing the file once, before anything runs
    suite: float = SUITE_TIMEOUT  # the whole suite, reruns included
    checkpoint: float = CHECKPOINT_TIMEOUT  # the whole checkpoint

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            validate.seconds(value, f"the {name} limit", positive=True)

    def argv(self) -> list[str]:
        """The same limits as ``python -m lucyshop.lab.check`` options (the defaults left out)."""
        return [
            f"--{name}-timeout={value:g}"
            for name, value in asdict(self).items()
            if value != getattr(Limits, name)
        ]


def module_of(function: str) -> str:
    return "test_" + function.rpartition(".")[2]


def subjects() -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """Every row of the table: (label, test directory, its test modules, the stubs that are its
    own)."""
    rows = [(function, SUITES[0], (module_of(function),), (function,)) for function in FUNCTIONS]
    return rows + [
        (label, SUITE_OF.get(label, SUITES[1]), modules, stubs)
        for label, modules, stubs in EXERCISES
    ]


@dataclass
class Failure:
    test: str
    message: str
    rerun: str


@dataclass
class Row:
    label: str
    kind: str
    status: str
    passed: int = 0
    total: int = 0
    message: str = ""
    failures: list[Failure] = field(default_factory=list)


class CannotCheck(Exception):
    """The implementation cannot be checked at all: one line says why (exit 2)."""


def shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def rerun_command(nodeid: str, spec: str) -> str:
    python = shown(Path(sys.executable))
    return (
        f"{RERUN_ENV} {python} -m pytest {shlex.quote(nodeid)} --impl {shlex.quote(spec)}"
        " -p pytest_timeout"
    )


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), never sent: an
    escape sequence from a student's message cannot redraw or hide a row."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


# ---------------------------------------------------------------- the file itself


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


def wait(child: OwnGroupChild, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while (status := child.poll()) is None:
        if time.monotonic() > deadline:
            child.kill()
            return None
        time.sleep(POLL)
    return status


def stubs_in(path: Path) -> dict[str, str | None]:
    """The functions (``Class.method`` for methods) whose body is still ``raise NotStarted``,
    each with the notebook section its stub names."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    return {name: stub_section(node) for name, node in functions_in(tree) if is_stub_node(node)}


def all_stubs(path: Path) -> dict[str, str | None]:
    """The stubs of a student's files: the chapter file's and ``exercises.py``'s by name, and
    those of the ``ch13_postgres.py`` beside them as ``ch13_postgres.<name>``."""
    pg = stubs_in(path.with_name(PG_FILE))
    pg = {f"{Path(PG_FILE).stem}.{name}": section for name, section in pg.items()}
    return stubs_in(path) | stubs_in(path.with_name("exercises.py")) | pg


def held_rows(path: Path, measured: bool, stubs: dict[str, str | None]) -> dict[str, tuple]:
    """The rows that run no test, each with its status and message: the measured exercises
    under ``--no-measured``; exercise 7, once it is not a stub, without its file or PostgreSQL."""
    held = {} if measured else dict.fromkeys(MEASURED, LEFT_OUT)
    if any(stub in stubs for stub in PG_STUBS):
        return held  # NOT STARTED by its syntax: nothing needs to run
    if not path.with_name(PG_FILE).is_file():
        held[PG_EXERCISE] = (
            "FAILING",
            f"no {PG_FILE} beside {shown(path)}: exercise 7 lives there",
        )
    elif reason := postgres_missing():
        held[PG_EXERCISE] = (LEFT_OUT[0], f"left out: it needs PostgreSQL, and {reason}")
    return held


def not_started(section: str | None) -> str:
    """A NOT STARTED row's message: where to read first."""
    return f"read notebook {section}" if section else "the body is still `raise NotStarted(...)`"


# ---------------------------------------------------------------- the suites


@dataclass
class SuiteRun:
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    tail: list[str] = field(default_factory=list)
    problem: str | None = None  # why the suite could not run (exit 2)
    stopped: str | None = None  # why some tests were never reached


class Outcomes:
    """Reads a growing outcomes file: the test running now, and since when."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""
        self.records: list[dict[str, Any]] = []
        self.current: str | None = None
        self.since = time.monotonic()
        self.finished = False

    def read(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = self.partial + handle.read()
                self.offset = handle.tell()
        except OSError:
            return
        *lines, self.partial = data.split(b"\n")
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            self.records.append(record)
            if record.get("event") == "finish":
                self.finished = True
            elif record.get("event") == "start":
                self.current, self.since = record["nodeid"], time.monotonic()
            elif record.get("nodeid") == self.current:
                self.current = None


def suite_argv(
    path: Path, paths: Sequence[str], outcomes: Path, skip: dict, hung: list, deadline: float
) -> list:
    argv = [sys.executable, "-m", "pytest", *paths, "--impl", str(path)]
    argv += ["-q", "--color=no", "-p", "lucyshop.lab.check.collect", "--outcomes", str(outcomes)]
    argv += [f"--deadline={deadline:g}"]
    if importlib.util.find_spec("pytest_timeout") is not None:
        argv += ["-p", "pytest_timeout", "--timeout", f"{deadline:g}"]
    argv += [f"--hung={function}" for function in hung]
    return argv + [f"--deselect={nodeid}" for nodeid in skip]


def watch_suite(
    child: OwnGroupChild, outcomes: Outcomes, until: float, deadline: float, scratch: Path
) -> tuple[str | None, str] | None:
    """Wait for the child; None when it ran to its end, else (the test it stopped in, why).
    A test whose sandbox fills its scratch past ``DISK_LIMIT`` is stopped like a hang."""
    weighed = time.monotonic()
    while True:
        status = child.poll()
        outcomes.read()
        if status is not None:
            if outcomes.finished:
                return None  # a result it never wrote is counted against its row
            if outcomes.current is not None:
                return outcomes.current, "ended the test process (os._exit, a signal or a crash)"
            return None, "the test process ended before the end of the suite"
        now = time.monotonic()
        limit = deadline_of(outcomes.current, deadline) if outcomes.current else 0.0
        if outcomes.current and now - outcomes.since > limit + GRACE:
            child.kill()
            return outcomes.current, f"timed out after {limit:g} s"
        if now > until:
            child.kill()
            return outcomes.current, "the whole suite ran out of time"
        if now - weighed > WEIGH_EVERY:
            weighed = now
            if disk_usage(scratch) > DISK_LIMIT:
                child.kill()
                return outcomes.current, f"wrote over {DISK_LIMIT >> 20} MiB to its scratch"
        time.sleep(POLL)


def run_suites(
    path: Path,
    env: dict[str, str],
    tmp: Path,
    marker: str,
    paths: Sequence[str],
    limits: Limits = Limits(),
) -> SuiteRun:
    """Run the suites; after a test that hangs or kills its process, rerun the rest without it."""
    run, hung = SuiteRun(), []
    until = time.monotonic() + limits.suite
    # Plugins not autoloaded: seconds of start-up saved per run. TMPDIR: whatever the child
    # makes (its sandboxes' directories too) goes with this check's own, even if it is killed.
    env = env | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TMPDIR": str(tmp)}
    for attempt in range(MAX_RESTARTS + 1):
        outcomes = Outcomes(tmp / f"outcomes-{attempt}.jsonl")
        argv = suite_argv(path, paths, outcomes.path, run.results, hung, limits.test)
        scratch = tmp / f"scratch-{attempt}"  # the sandboxes' only writable place; gone after
        argv.append(f"--basetemp={scratch}")
        child = OwnGroupChild(
            argv, cwd=ROOT, env=env, log=tmp / f"pytest-{attempt}.log", marker=marker
        )
        stopped = watch_suite(child, outcomes, until, limits.test, scratch)
        run.tail = child.tail()
        before = len(run.results)
        for record in outcomes.records:
            if record.get("event") in ("result", "collect_error"):
                run.results[record["nodeid"]] = record
            if record.get("hung") and record["hung"] not in hung:  # past its deadline in a test:
                hung.append(record["hung"])  # a rerun fails it at once, as this run did
        if stopped is not None and attempt and len(run.results) == before:
            run.stopped = "the test process reported no results twice in a row"
            return run
        if stopped is None:
            if child.poll() not in (0, 1, 5) and not outcomes.records:
                last = [line for line in run.tail if line.strip()]
                run.problem = f"pytest exit {child.poll()}: {last[-1] if last else ''}"
            return run
        nodeid, why = stopped
        if nodeid is None:
            run.stopped = why
            return run
        function = row_function(nodeid)
        run.results[nodeid] = {
            "event": "result",
            "nodeid": nodeid,
            "module": Path(nodeid.split("::")[0]).stem,
            "outcome": "failed",
            "message": f"{why} in {function}()",
            "hung": function,
            "not_started": None,
        }
        if function not in hung:
            hung.append(function)
        if time.monotonic() > until:
            run.stopped = "the whole suite ran out of time"
            return run
    run.stopped = f"the test process was stopped {MAX_RESTARTS + 1} times"
    return run


def run_side_by_side(
    path: Path,
    env: dict[str, str],
    tmp: Path,
    marker: str,
    parts: Sequence[Sequence[str]],
    limits: Limits = Limits(),
) -> SuiteRun:
    """Each part of the suites in a pytest child of its own, all at once; their results as one.

    The measured exercises mostly wait (on the stand-in's scripted turns, on leases), so beside
    the rest they cost a check almost no time of its own."""

    def run_part(number: int, paths: Sequence[str]) -> SuiteRun:
        own = tmp / f"part-{number}"
        own.mkdir()
        return run_suites(path, env, own, marker, paths, limits)

    with ThreadPoolExecutor(max_workers=max(1, len(parts))) as pool:
        runs = list(pool.map(run_part, range(len(parts)), parts))
    merged = SuiteRun()
    for run in runs:
        merged.results |= run.results
        merged.tail += run.tail
        merged.problem = merged.problem or run.problem
        merged.stopped = merged.stopped or run.stopped
    return merged


def row_function(nodeid: str) -> str:
    module = Path(nodeid.split("::")[0]).stem
    if module in PG_MODULES:  # exercise 7: one module per function
        return module.removeprefix("test_pg_")
    label = next((s[0] for s in subjects() if module in s[2]), module)
    return label.rpartition(".")[2]


def pristine_counts(tmp: Path, marker: str, paths: Sequence[str]) -> OwnGroupChild:
    """Collect (never run) the same suites against the kit's own stubs, in another process."""
    argv = [sys.executable, "-m", "pytest", *paths, "--collect-only", "-q", "--impl", "learner"]
    if importlib.util.find_spec("pytest_timeout") is not None:  # its marker, as the suites have
        argv += ["-p", "pytest_timeout"]
    env = os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop(ENV, None)
    return OwnGroupChild(argv, cwd=ROOT, env=env, log=tmp / "collect.log", marker=marker)


def read_counts(child: OwnGroupChild) -> dict[str, int] | None:
    if wait(child, LOAD_TIMEOUT) not in (0, 5):
        return None
    counts: dict[str, int] = {}
    for line in Path(child.log).read_text(encoding="utf-8", errors="replace").splitlines():
        if "::" in line:
            module = Path(line.split("::")[0]).stem
            counts[module] = counts.get(module, 0) + 1
    return counts


# ---------------------------------------------------------------- the table


def build_rows(
    results: dict[str, dict[str, Any]],
    spec: str,
    *,
    stubs: dict[str, str | None],
    counts: dict[str, int] | None,
    stopped: str | None = None,
    held: dict[str, tuple[str, str]] | None = None,
    only: str | None = None,
) -> list[Row]:
    """One row per function and exercise; ``held`` maps a row that did not run to its status
    and message (``held_rows``)."""
    hangs: dict[str, str] = {}  # function -> how it hung or died, from the first test it did
    for record in results.values():  # exercise 7's functions share the chapter's names
        if record.get("hung") and record.get("module") not in PG_MODULES:
            hangs.setdefault(record["hung"], record["message"])
    rows = []
    for label, _directory, modules, own_stubs in subjects():
        if only is not None and label != only:
            continue
        kind = "exercise" if label.startswith("exercise") else "function"
        if held and label in held:
            rows.append(Row(label, kind, held[label][0], message=held[label][1]))
            continue
        tests = [r for r in results.values() if r.get("module") in modules]
        row = grade_row(label, kind, tests, own_stubs, spec, stubs, counts, modules, stopped)
        if row.status != "NOT STARTED" and label.rpartition(".")[2] in hangs:
            row.status, row.message = "FAILING", hangs[label.rpartition(".")[2]]
        rows.append(row)
    return rows


def grade_row(
    label: str,
    kind: str,
    tests: list[dict[str, Any]],
    own_stubs: tuple[str, ...],
    spec: str,
    stubs: dict[str, str | None],
    counts: dict[str, int] | None,
    modules: tuple[str, ...],
    stopped: str | None,
) -> Row:
    passed = sum(r["outcome"] == "passed" for r in tests)
    known = counts is not None and all(module in counts for module in modules)
    expected = sum(counts[module] for module in modules) if known else None
    row = Row(label, kind, "PASSING", passed, expected or len(tests))
    prefix = f"{Path(PG_FILE).stem}."  # a NotStarted names the function alone
    own = [r for r in tests if r.get("not_started") in {s.removeprefix(prefix) for s in own_stubs}]
    failing = [r for r in tests if r["outcome"] == "failed"]
    row.failures = [
        Failure(r["nodeid"], failure_message(r, label), rerun_command(r["nodeid"], spec))
        for r in failing
    ]
    if own or any(stub in stubs for stub in own_stubs):
        row.status = "NOT STARTED"
        section = own[0].get("section") if own else None
        row.message = not_started(
            section or next((stubs[s] for s in own_stubs if s in stubs), None)
        )
        row.failures = []
    elif failing:
        row.status = "FAILING"
        row.message = row.failures[0].message
    elif not tests:
        row.status = "FAILING"
        row.message = f"not reached: {stopped}" if stopped else "no test ran"
    elif expected is not None and len(tests) != expected:
        row.status = "FAILING"
        row.message = f"{len(tests)} of its {expected} tests reported a result" + (
            f" ({stopped})" if stopped else ""
        )
    return row


def failure_message(record: dict[str, Any], label: str) -> str:
    other = record.get("not_started")
    if other:
        return f"needs {other}() first: it is not started"
    blocked = record.get("blocked_by")
    if blocked == label.rpartition(".")[2]:
        return f"not run again: {blocked}() hung or ended the process in an earlier test"
    if blocked:
        return f"needs {blocked}() first: it hung or ended the process in an earlier test"
    return record.get("message") or "failed"


def table_lines(rows: list[Row]) -> list[str]:
    width = max(len(r.label) for r in rows) + 2
    lines = [f"  {'function':<{width}}{'status':<13}{'tests':>7}"]
    pad = " " * (width + 22)
    for row in rows:
        tests = "" if row.status == LEFT_OUT[0] else f"{row.passed}/{row.total}"
        line = f"  {row.label:<{width}}{row.status:<13}{tests:>7}"
        lines.append(f"{line}   {row.message}" if row.message else line)
        for failure in row.failures:
            lines.append(f"{pad} {failure.test.split('::')[-1]}: {failure.message}")
            lines.append(f"{pad}   rerun: {failure.rerun}")
    return lines


def summary_line(rows: list[Row], checkpoint: str) -> str:
    functions = [r for r in rows if r.kind == "function"]
    exercises = [r for r in rows if r.kind == "exercise"]
    count = lambda group, status: sum(r.status == status for r in group)
    parts = [f"{count(functions, 'PASSING')}/{len(functions)} functions PASSING"]
    for status in ("FAILING", "NOT STARTED"):
        if count(functions, status):
            parts[0] += f", {count(functions, status)} {status}"
    parts.append(f"checkpoint {checkpoint}")
    words = [f"{count(exercises, 'NOT STARTED')} of {len(exercises)} not started"]
    if count(exercises, "FAILING"):
        words.append(f"{count(exercises, 'FAILING')} FAILING")
    if count(exercises, "LEFT OUT"):
        words.append(f"{count(exercises, 'LEFT OUT')} left out")
    parts.append("exercises: " + ", ".join(words))
    return " · ".join(parts)


def exit_status(rows: list[Row], checkpoint: str, tampered: bool) -> int:
    if tampered or checkpoint == "FAILED" or any(r.status == "FAILING" for r in rows):
        return 1
    functions = [r for r in rows if r.kind == "function"]
    if checkpoint == "NOT STARTED" or any(r.status != "PASSING" for r in functions):
        return 3
    return 0


# ---------------------------------------------------------------- the checkpoint

_REFERENCE_FRAME = re.compile(r'^\s*File "' + re.escape(str(SOLUTIONS)) + r'[/"]')


def without_reference_source(lines: list[str]) -> list[str]:
    """Drop the source lines a traceback quotes from the solutions (the frame line itself stays)."""
    kept, skipping = [], False
    for line in lines:
        if _REFERENCE_FRAME.match(line):
            kept.append(line)
            skipping = True
            continue
        if skipping and line.startswith("    ") and not line.lstrip().startswith("File "):
            continue
        skipping = False
        kept.append(line)
    return kept


class Checkpoint:
    """The checkpoint child and its watcher thread: a deadline per case and for the whole."""

    def __init__(
        self, path: Path, env: dict[str, str], tmp: Path, marker: str, limits: Limits
    ) -> None:
        self.keep = tmp / "checkpoint"
        self.evidence = tmp / "evidence.json"  # outside every sandbox's scratch
        argv = [sys.executable, str(CHECKPOINT), "--impl", str(path)]
        argv += ["--evidence", str(self.evidence), "--keep", str(self.keep)]
        self.keep.mkdir()
        env = env | {"TMPDIR": str(tmp)}  # its sandboxes' directories go with the check's
        self.child = OwnGroupChild(
            argv, cwd=ROOT, env=env, log=tmp / "checkpoint.log", marker=marker
        )
        self.limits, self.stopped = limits, None
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _current(self) -> str | None:
        try:
            cases = json.loads(self.evidence.read_text(encoding="utf-8"))["cases"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return next((n for n, c in cases.items() if c.get("result") == "started"), None)

    def _watch(self) -> None:
        case, since = None, time.monotonic()
        while self.child.poll() is None:
            now = time.monotonic()
            current = self._current()
            if current != case:
                case, since = current, now
            if now - self.child.started > self.limits.checkpoint:
                whole = self.limits.checkpoint
                self.stopped = (case, f"the checkpoint did not finish within {whole:g} s")
            elif case is not None and now - since > self.limits.case:
                self.stopped = (case, f"timed out after {self.limits.case:g} s")
            elif disk_usage(self.keep) > DISK_LIMIT:
                self.stopped = (case, f"wrote over {DISK_LIMIT >> 20} MiB to its scratch")
            if self.stopped:
                self.child.kill()
                return
            time.sleep(POLL * 2)

    def verdict(self) -> tuple[str, list[judge.Case], list[str]]:
        self.thread.join()
        status, cases = judge.judge(self.evidence, self.keep)
        if self.stopped:
            name, why = self.stopped
            for case in cases:
                if case.name == name:
                    case.message = why
            status = "FAILED"
        lines = [line for line in self.child.tail() if not line.startswith("evidence: ")]
        tail = without_reference_source(lines)[-CHECKPOINT_LINES:]
        return status, cases, tail


# ---------------------------------------------------------------- one check


@dataclass
class Result:
    impl: str
    exit: int = 2
    summary: str = ""
    error: str | None = None
    rows: list[Row] = field(default_factory=list)
    checkpoint: dict[str, Any] = field(
        default_factory=lambda: {"status": "SKIPPED", "cases": [], "tail": []}
    )
    feedback: list[str] = field(default_factory=list)

    def say(self, line: str = "") -> None:
        line = printable(line)  # text from the student's code never drives the terminal
        print(line, flush=True)
        self.feedback.append(line)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "impl": self.impl,
            "exit": self.exit,
            "summary": self.summary,
            "error": self.error,
            "rows": [asdict(row) for row in self.rows],
            "checkpoint": self.checkpoint,
            "feedback": "\n".join(self.feedback) + "\n",
        }


def check(
    spec: str, *, checkpoint: bool = True, measured: bool = True, limits: Limits = Limits()
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
    status = "SKIPPED"
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


def suite_paths(suite: str, left_out: set[tuple[str, str]]) -> list[str]:
    """What pytest is given to run ``suite`` less the ``left_out`` (directory, module) pairs:
    the directory with an ``--ignore`` for each, or, for a directory that also holds the kit's
    own tests (tests/postgres), its row modules by name. Empty when nothing of it is left."""
    mine = {(d, m) for _label, d, modules, _own in subjects() if d == suite for m in modules}
    if not mine - left_out:
        return []
    if suite in SUITE_OF.values():
        return [f"{d}/{m}.py" for d, m in sorted(mine - left_out)]
    return [suite, *(f"--ignore={d}/{m}.py" for d, m in sorted(mine & left_out))]


def plan(stubs: dict[str, str | None], held: dict[str, tuple]) -> tuple[list[str], list[list]]:
    """What the pristine collection is given, and the parts the suites run in.

    A held row never runs; nor do the tests of a row still a stub by its syntax, which is NOT
    STARTED whatever they report (the counts still name all its tests). Each suite runs in a
    pytest child of its own, and each measured exercise (mostly waiting on its scripted turns
    and leases) in another: the tests wait on the sandbox more than they compute, so side by
    side they take the time of the longest. Exercise 7 is a suite of its own (tests/postgres,
    with its own PostgreSQL server)."""
    pairs = [(label, d, m, own) for label, d, modules, own in subjects() for m in modules]
    held_out = {(d, m) for label, d, m, _own in pairs if label in held}
    stubbed = {(d, m) for _label, d, m, own in pairs if any(s in stubs for s in own)}
    paths = [p for suite in SUITES for p in suite_paths(suite, held_out)]
    skipped = stubbed | held_out
    alone = {(d, m) for label, d, m, _own in pairs if label in MEASURED} - skipped
    parts = [suite_paths(suite, skipped | alone) for suite in SUITES]
    parts = [part for part in parts if part] + [[f"{d}/{m}.py"] for d, m in sorted(alone)]
    return paths, parts


def run_check(
    result: Result,
    path: Path,
    env: dict[str, str],
    tmp: Path,
    marker: str,
    with_checkpoint: bool,
    measured: bool,
    limits: Limits,
) -> str:
    """Run the suites and the checkpoint side by side, print the table; the checkpoint status."""
    result.say(f"make check: {result.impl}; {describe()}")
    if edited := kit_changes(ROOT):
        result.say(
            "note: these kit files differ from the commit, and every check runs with them:"
            f" {', '.join(edited)} (git diff shows how; git checkout -- FILE puts one back)"
        )
    result.say()
    stubs = all_stubs(path)
    held = held_rows(path, measured, stubs)
    paths, parts = plan(stubs, held)
    running = None
    if with_checkpoint and (ROOT / CHECKPOINT).is_file():
        running = Checkpoint(path, env, tmp, marker, limits)
    collecting = pristine_counts(tmp, marker, paths)
    run = run_side_by_side(path, env, tmp, marker, parts, limits)
    counts = read_counts(collecting)
    if run.problem:
        raise CannotCheck(f"the learner suite could not run ({run.problem})")
    result.rows = build_rows(
        run.results,
        result.impl,
        stubs=stubs,
        counts=counts,
        stopped=run.stopped,
        held=held,
    )
    for line in table_lines(result.rows):
        result.say(line)
    if running is None:
        if with_checkpoint:
            result.say()
            result.say(f"checkpoint: {CHECKPOINT} is not there; skipped")
        return "SKIPPED"
    status, cases, tail = running.verdict()
    result.checkpoint = {"status": status, "cases": [asdict(c) for c in cases], "tail": tail}
    result.say()
    python = shown(Path(sys.executable))  # the venv's: the line works without activating it
    result.say(f"checkpoint: {python} {CHECKPOINT} --impl {shlex.quote(result.impl)}")
    if status == "FAILED":  # what the checkpoint itself printed last, to debug from
        for line in tail:
            result.say(f"  | {line}")
    result.say("checkpoint verdict, read from the files it kept (never from its exit status):")
    for case in cases:
        mark = "PASS" if case.passed else "NOT STARTED" if status == "NOT STARTED" else "FAIL"
        result.say(f"  {mark}  {case.case} {case.name}: {case.message}")
    return status


def verdict(label: str, spec: str | None = None, limits: Limits = Limits()) -> str:
    """One row of the table, for a notebook's check cell: its status and every failing test."""
    spec = spec or os.environ.get(ENV) or "learner"
    path = impl_path(spec)
    _label, directory, modules, own_stubs = next(s for s in subjects() if s[0] == label)
    stubs = all_stubs(path)
    stub = next((s for s in own_stubs if s in stubs), None)
    if stub is not None:  # still the stub, read from its syntax: there is nothing to run yet
        return f"{label}: NOT STARTED\n  {not_started(stubs[stub])}"
    held = held_rows(path, True, stubs).get(label)
    if held is not None:  # exercise 7 without its file or PostgreSQL
        return f"{label}: {held[0]}\n  {held[1]}"
    marker = new_marker()
    with tempfile.TemporaryDirectory(prefix="lucyshop-verdict-") as tmp:
        try:
            run = run_suites(
                path,
                os.environ | {ENV: str(path)},
                Path(tmp),
                marker,
                [f"{directory}/{module}.py" for module in modules],
                limits,
            )
        finally:
            sweep(marker)
    row = build_rows(run.results, spec, stubs=stubs, counts=None, stopped=run.stopped, only=label)[
        0
    ]
    text = f"{label}: {row.status} ({row.passed}/{row.total} checks)"
    if row.status == "PASSING":
        return text
    lines = [text] + ([f"  {row.message}"] if not row.failures else [])
    for failure in row.failures:
        lines += [
            f"  {failure.test.split('::')[-1]}: {failure.message}",
            f"    rerun: {failure.rerun}",
        ]
    return "\n".join(lines)


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
        wait(child, LOAD_TIMEOUT)
    return {"check_seconds": round(whole, 2), "rerun_seconds": round(time.monotonic() - start, 2)}


# ---------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.check",
        description="Check a chapter-13 file: each function's status, then the checkpoint.",
    )
    parser.add_argument(
        "--impl",
        default=None,
        help="learner, solutions or a path (default: $LEASES_IMPL, else learner)",
    )
    parser.add_argument("--no-checkpoint", action="store_true", help="show the table only")
    parser.add_argument(
        "--no-measured",
        action="store_true",
        help="leave out exercises 5 and 6 (a minute of real model turns)",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")
    seconds = {
        "test": "one test",
        "case": "one checkpoint case",
        "load": "importing the file",
        "suite": "the whole suite",
        "checkpoint": "the whole checkpoint",
    }
    for name, what in seconds.items():
        parser.add_argument(
            f"--{name}-timeout",
            type=float,
            default=getattr(Limits, name),
            metavar="S",
            help=f"seconds for {what} (default %(default)g)",
        )
    args = parser.parse_args(argv)
    spec = args.impl or os.environ.get(ENV) or "learner"
    try:
        limits = Limits(**{name: getattr(args, f"{name}_timeout") for name in seconds})
    except ValueError as error:
        parser.error(str(error))
    result = check(
        spec, checkpoint=not args.no_checkpoint, measured=not args.no_measured, limits=limits
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result.as_json(), indent=2) + "\n", encoding="utf-8")
    return result.exit
