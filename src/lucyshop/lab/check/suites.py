"""The pytest children of one ``make check``: what each runs, side by side, watched to the end.

Each suite (``spec/learner``, ``spec/exercises``, ``spec/postgres``) runs its row modules,
named, in a child of its own (the chapter's in several: ``CHILDREN_OF``), and each measured
exercise's measurement in another (``plan``); a child's scratch goes as soon as it ends. A
child writes its outcomes as it goes (``lucyshop.lab.check.plugin.collect``); ``watch_suite``
reads them, and stops a child whose test ran past its deadline, whose process died, or whose
sandboxes filled their scratch. The rest of its part is then rerun without that test, its
function failing at once in the tests after it.
Each child also writes how many tests each of its modules has, counted before a rerun
deselects any; the modules of a row still a stub, which no child runs, are counted by a
``--collect-only`` run on the kit's own stubs (``pristine_counts``). A row with fewer results
than its count is not PASSING.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucyshop import IMPL_ENV
from lucyshop.lab.check.guard import (
    DEFAULT_LIMITS,
    DISK_LIMIT,
    Limits,
    OwnGroupChild,
    disk_usage,
)
from lucyshop.lab.check.subjects import (
    BEYOND,
    MEASUREMENTS,
    SPEC,
    SUITES,
    deadline_of,
    row_function,
    subjects,
)
from lucyshop.lab.loader import ROOT
from lucyshop.lab.sandbox.jail import remove_tree
from lucyshop.lab.services.limits import LOAD_SECONDS

GRACE = 10.0  # past a test's own deadline before its process is stopped
MAX_RESTARTS = 8
POLL = 0.1
WEIGH_EVERY = 0.25  # seconds between two weighings of the scratch
# A suite whose tests wait on the sandbox's answers one call at a time runs in this many pytest
# children side by side, each with a worker of its own, its modules dealt in the table's order.
CHILDREN_OF = {SUITES[0]: 2}
# What every pytest child loads: spec/conftest.py (the chapter plugin: the file and its sandbox,
# ``--impl``) and its suites' own, and no conftest above spec/ (pytest skips one in any folder
# above --confcutdir): the kit's tests/ is not below it, and a conftest.py at the kit's root
# would not run.
SUITE_ONLY = [f"--confcutdir={SPEC}"]


@dataclass
class SuiteRun:
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # module -> tests, as collected
    tail: list[str] = field(default_factory=list)
    problem: str | None = None  # why the suite could not run (exit 2)
    stopped: str | None = None  # why some tests were never reached


def wait(child: OwnGroupChild, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while (status := child.poll()) is None:
        if time.monotonic() > deadline:
            child.kill()
            return None
        time.sleep(POLL)
    return status


# ---------------------------------------------------------------- what runs where


def row_modules(suite: str, left_out: set[tuple[str, str]]) -> list[str]:
    """The row modules of ``suite`` less the ``left_out`` (directory, module) pairs, by path,
    in the table's order: what pytest is given, so that a file in spec/ that no row names (a
    stray one) never runs in a check."""
    mine = [(s.directory, m) for s in subjects() if s.directory == suite for m in s.modules]
    return [f"{d}/{m}.py" for d, m in mine if (d, m) not in left_out]


def dealt(suite: str, left_out: set[tuple[str, str]]) -> list[list[str]]:
    """The parts ``suite`` runs in, a pytest child each: its row modules dealt to
    ``CHILDREN_OF[suite]`` children (one by default); no part when nothing of it is left."""
    modules, children = row_modules(suite, left_out), CHILDREN_OF.get(suite, 1)
    return [modules[n::children] for n in range(children) if modules[n::children]]


def plan(stubs: dict[str, str | None], aside: dict[str, Any]) -> tuple[list[str], list[list]]:
    """What the pristine collection is given (the modules of the rows still a stub), and the
    parts the suites run in.

    A row set aside never runs; nor do the tests of a row still a stub by its syntax, which is
    NOT STARTED whatever they do (the counts still name all its tests). Each suite runs in
    a pytest child of its own (the chapter's in ``CHILDREN_OF``'s), and each measured exercise's
    measurement (``MEASUREMENTS``: mostly waiting on its scripted turns and leases) in
    another, which starts it at once: the tests wait on the sandbox
    more than they compute, so side by side they take the time of the longest. A function
    that hangs costs each child that calls it one deadline, side by side; after it, it fails
    at once in that child's tests. Each row beyond the book runs in a child of its own too, so
    that a function that hangs there never fails at once in a chapter row's tests. Exercise 7
    is a suite of its own (spec/postgres, with its own PostgreSQL server)."""
    pairs = [(s, (s.directory, m)) for s in subjects() for m in s.modules]
    not_run = {pair for s, pair in pairs if s.label in aside}
    stubbed = {pair for s, pair in pairs if any(stub in stubs for stub in s.stubs)}
    paths = [f"{d}/{m}.py" for _s, (d, m) in pairs if (d, m) in stubbed - not_run]
    skipped = stubbed | not_run
    alone = {pair for s, pair in pairs if pair[1] in MEASUREMENTS or s in BEYOND} - skipped
    parts = [part for suite in SUITES for part in dealt(suite, skipped | alone)]
    parts += [[f"{d}/{m}.py"] for d, m in sorted(alone)]
    return paths, parts


# ---------------------------------------------------------------- one child


class OutcomeReader:
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
    argv = [sys.executable, "-m", "pytest", *paths, *SUITE_ONLY, "--impl", str(path)]
    argv += ["-q", "--color=no", "-p", "lucyshop.lab.check.plugin.collect"]
    argv += ["--outcomes", str(outcomes), f"--deadline={deadline:g}"]
    if importlib.util.find_spec("pytest_timeout") is not None:
        argv += ["-p", "pytest_timeout", "--timeout", f"{deadline:g}"]
    argv += [f"--hung={function}" for function in hung]
    return argv + [f"--deselect={nodeid}" for nodeid in skip]


def watch_suite(
    child: OwnGroupChild, outcomes: OutcomeReader, until: float, deadline: float, scratch: Path
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


def stopped_in(nodeid: str, why: str) -> dict[str, Any]:
    """The failed result of a test its child was stopped in: its function is the one that hung."""
    function = row_function(nodeid)
    return {
        "event": "result",
        "nodeid": nodeid,
        "module": Path(nodeid.split("::")[0]).stem,
        "outcome": "failed",
        "message": f"{why} in {function}()",
        "hung": function,
        "not_started": None,
    }


def keep_outcomes(run: SuiteRun, outcomes: OutcomeReader, hung: list[str]) -> None:
    """Add what one child wrote back to ``run``, and each function it found hung to ``hung``."""
    for record in outcomes.records:
        if record.get("event") in ("result", "collect_error"):
            run.results[record["nodeid"]] = record
        if record.get("event") == "collected":
            run.counts |= record["counts"]
        if record.get("hung") and record["hung"] not in hung:  # past its deadline in a test:
            hung.append(record["hung"])  # a rerun fails it at once, as this run did


def ended(run: SuiteRun, child: OwnGroupChild, outcomes: OutcomeReader) -> SuiteRun:
    """A child that ran to its end: a pytest that failed before any test says why."""
    if child.poll() not in (0, 1, 5) and not outcomes.records:
        last = [line for line in run.tail if line.strip()]
        run.problem = f"pytest exit {child.poll()}: {last[-1] if last else ''}"
    return run


def run_suites(
    path: Path,
    env: dict[str, str],
    tmp: Path,
    marker: str,
    paths: Sequence[str],
    limits: Limits = DEFAULT_LIMITS,
) -> SuiteRun:
    """Run the suites; after a test that hangs or kills its process, rerun the rest without it."""
    run, hung = SuiteRun(), []
    until = time.monotonic() + limits.suite
    # Plugins not autoloaded: seconds of start-up saved per run. TMPDIR: whatever the child
    # makes (its sandboxes' directories too) goes with this check's own, even if it is killed.
    env = env | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TMPDIR": str(tmp)}
    for attempt in range(MAX_RESTARTS + 1):
        outcomes = OutcomeReader(tmp / f"outcomes-{attempt}.jsonl")
        argv = suite_argv(path, paths, outcomes.path, run.results, hung, limits.test)
        scratch = tmp / f"scratch-{attempt}"  # the sandboxes' only writable place; gone after
        argv.append(f"--basetemp={scratch}")
        child = OwnGroupChild(
            argv, cwd=ROOT, env=env, log=tmp / f"pytest-{attempt}.log", marker=marker
        )
        stopped = watch_suite(child, outcomes, until, limits.test, scratch)
        # Removed now, while the other children still run, not in the check's last seconds.
        remove_tree(scratch)
        run.tail = child.tail()
        before = len(run.results)
        keep_outcomes(run, outcomes, hung)
        if stopped is None:
            return ended(run, child, outcomes)
        nodeid, why = stopped
        if attempt and len(run.results) == before:
            run.stopped = "the test process wrote back no results twice in a row"
            return run
        if nodeid is None:
            run.stopped = why
            return run
        run.results[nodeid] = stopped_in(nodeid, why)
        if run.results[nodeid]["hung"] not in hung:
            hung.append(run.results[nodeid]["hung"])
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
    limits: Limits = DEFAULT_LIMITS,
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
        merged.counts |= run.counts
        merged.tail += run.tail
        merged.problem = merged.problem or run.problem
        merged.stopped = merged.stopped or run.stopped
    return merged


# ---------------------------------------------------------------- how many tests each row has


def pristine_counts(tmp: Path, marker: str, paths: Sequence[str]) -> OwnGroupChild:
    """Collect (never run) the modules ``paths`` against the kit's own stubs, in another
    process: the counts of the rows no child runs."""
    argv = [sys.executable, "-m", "pytest", *paths, *SUITE_ONLY, "--collect-only", "-q"]
    argv += ["--impl", "learner"]
    if importlib.util.find_spec("pytest_timeout") is not None:  # its marker, as the suites have
        argv += ["-p", "pytest_timeout"]
    env = os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop(IMPL_ENV, None)
    return OwnGroupChild(argv, cwd=ROOT, env=env, log=tmp / "collect.log", marker=marker)


def read_counts(child: OwnGroupChild) -> dict[str, int] | None:
    if wait(child, LOAD_SECONDS) not in (0, 5):
        return None
    counts: dict[str, int] = {}
    for line in Path(child.log).read_text(encoding="utf-8", errors="replace").splitlines():
        if "::" in line:
            module = Path(line.split("::")[0]).stem
            counts[module] = counts.get(module, 0) + 1
    return counts
