"""``make check``'s table: the rows read from the suites' outcomes, and every line it prints.

A row is NOT STARTED when its body is still the stub, read from the file's syntax alone (a
``NotStarted`` raised by a written function is a failure like any other); FAILING
with every failing test (one line each: what was expected, what happened, and the command
that reruns just that test); PASSING only when every test of it passed and as many gave a
result as pytest collected for it. The summary line and the exit status come from the
rows and the checkpoint alone.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from lucyshop.lab.check.results import CheckpointResult, Failure, Row
from lucyshop.lab.check.subjects import (
    BEYOND,
    PG_MODULES,
    PG_PREFIX,
    Subject,
    function_of,
    kind_of,
    not_started,
    shown,
    subject,
    subjects,
)
from lucyshop.lab.checkpoint.cases import CASES
from lucyshop.lab.statuses import CheckpointStatus, Mark, Status, result_line

# What a printed rerun loads: the kit's conftest and pytest-timeout, no other plugin (seconds).
RERUN_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"


def rerun_command(nodeid: str, spec: str) -> str:
    python = shown(Path(sys.executable))
    return (
        f"{RERUN_ENV} {python} -m pytest {shlex.quote(nodeid)} --impl {shlex.quote(spec)}"
        " -p pytest_timeout"
    )


# ---------------------------------------------------------------- the rows


def build_rows(
    results: dict[str, dict[str, Any]],
    spec: str,
    *,
    stubs: dict[str, str | None],
    counts: dict[str, int] | None,
    stopped: str | None = None,
    aside: dict[str, tuple[Status, str]] | None = None,
    only: str | None = None,
) -> list[Row]:
    """One row per function and exercise (or the one called ``only``, which may be one of
    exercise 7's functions alone: ``subjects.PG_ROWS``); ``aside`` maps a row
    that did not run to its status and message (``subjects.set_aside``)."""
    hangs: dict[str, str] = {}  # function -> how it hung or died, from the first test it did
    # Exercise 7's functions share the chapter's names; a row beyond the book fails alone.
    apart = {*PG_MODULES, *(m for row in BEYOND for m in row.modules)}
    for record in results.values():
        if record.get("hung") and record.get("module") not in apart:
            hangs.setdefault(record["hung"], record["message"])
    rows = []
    for row in subjects() if only is None else [subject(only)]:
        kind = kind_of(row)
        if aside and row.label in aside:
            rows.append(Row(row.label, kind, aside[row.label][0], message=aside[row.label][1]))
            continue
        tests = [r for r in results.values() if r.get("module") in row.modules]
        found = row_from_tests(row, kind, tests, spec, stubs, counts, stopped)
        function = function_of(row)
        if found.status != Status.NOT_STARTED and function in hangs:
            found.status, found.message = Status.FAILING, hangs[function]
        rows.append(found)
    return rows


def row_from_tests(
    subject: Subject,
    kind: str,
    tests: list[dict[str, Any]],
    spec: str,
    stubs: dict[str, str | None],
    counts: dict[str, int] | None,
    stopped: str | None,
) -> Row:
    """The row of ``subject`` from its tests' results."""
    passed = sum(r["outcome"] == "passed" for r in tests)
    known = counts is not None and all(module in counts for module in subject.modules)
    expected = sum(counts[module] for module in subject.modules) if known else None
    row = Row(subject.label, kind, Status.PASSING, passed, expected or len(tests))
    # NOT STARTED by the file's syntax alone: a NotStarted that came back from the sandbox
    # is its word, which a written function can claim as easily as a stub.
    if any(stub in stubs for stub in subject.stubs):
        section = subject.section or next(stubs[s] for s in subject.stubs if s in stubs)
        row.status, row.message = Status.NOT_STARTED, not_started(section)
        return row
    row.failures = [
        Failure(
            r["nodeid"],
            failure_message(r, function_of(subject), stubs),
            rerun_command(r["nodeid"], spec),
        )
        for r in tests
        if r["outcome"] == "failed"
    ]
    if row.failures:
        row.status, row.message = Status.FAILING, row.failures[0].message
    elif not tests:
        row.status = Status.FAILING
        row.message = f"not reached: {stopped}" if stopped else "no test ran"
    elif expected is not None and len(tests) != expected:
        row.status = Status.FAILING
        row.message = f"{len(tests)} of its {expected} tests gave a result" + (
            f" ({stopped})" if stopped else ""
        )
    return row


def failure_message(record: dict[str, Any], function: str, stubs: dict[str, str | None]) -> str:
    """One line for a failed test of the row whose own function is ``function``."""
    other = record.get("not_started")
    if other and (other in stubs or f"{PG_PREFIX}{other}" in stubs):
        return f"needs {other}() first: it is not started"
    if other:  # a NotStarted for a function the syntax says is written: a failure like any
        return f"raised NotStarted for {other}(), which is not the stub: {record.get('message')}"
    blocked = record.get("blocked_by")
    if blocked == function:
        return f"not run again: {blocked}() hung or ended the process in an earlier test"
    if blocked:
        return f"needs {blocked}() first: it hung or ended the process in an earlier test"
    return record.get("message") or "failed"


# ---------------------------------------------------------------- what is printed


def table_lines(rows: list[Row]) -> list[str]:
    """The table: a line per row, then each failing test with the command that reruns it. A
    row beyond the book, which fails nothing else, lists its first failing test and the
    command that reruns all of its module; the JSON keeps every one."""
    width = max(len(r.label) for r in rows) + 2
    lines = [f"  {'function':<{width}}{'status':<13}{'tests':>7}"]
    pad = " " * (width + 22)
    for row in rows:
        tests = "" if row.status == Status.LEFT_OUT else f"{row.passed}/{row.total}"
        line = f"  {row.label:<{width}}{row.status:<13}{tests:>7}"
        lines.append(f"{line}   {row.message}" if row.message else line)
        listed = row.failures[:1] if row.kind == "beyond" else row.failures
        for failure in listed:
            lines.append(f"{pad} {failure.test.split('::')[-1]}: {failure.message}")
            lines.append(f"{pad}   rerun: {failure.rerun}")
        if more := len(row.failures) - len(listed):
            first = row.failures[0]
            module = first.test.split("::")[0]
            every = first.rerun.replace(shlex.quote(first.test), shlex.quote(module), 1)
            lines.append(f"{pad} and {more} more failing tests; rerun them all: {every}")
    return lines


def row_text(row: Row, *, ran: bool = True) -> str:
    """One row as a notebook's check cell shows it: its status (with its count when its tests
    ran), then every failing test."""
    text = f"{row.label}: {row.status}" + (f" ({row.passed}/{row.total} tests)" if ran else "")
    if row.status == Status.PASSING:
        return text
    lines = [text] + ([f"  {row.message}"] if not row.failures else [])
    for failure in row.failures:
        lines += [
            f"  {failure.test.split('::')[-1]}: {failure.message}",
            f"    rerun: {failure.rerun}",
        ]
    return "\n".join(lines)


def checkpoint_lines(checkpoint: CheckpointResult, command: str) -> list[str]:
    """The checkpoint after the table: how to run it alone, what it printed last when it
    is FAILING, and each case as the judge read it from the files it kept, by its title (the
    kit's own cases say they are beyond the book)."""
    lines = ["", f"checkpoint: {command}"]
    if checkpoint.status == CheckpointStatus.FAILING:  # what it printed last, to debug from
        lines += [f"  | {line}" for line in checkpoint.tail]
    lines.append(
        "checkpoint result, read by the judge from the files it kept (never from its exit status):"
    )
    waiting: dict[str, list[str]] = {}  # NOT STARTED cases by their message: one line each
    for case in checkpoint.cases:
        if not case.passed and checkpoint.status == CheckpointStatus.NOT_STARTED:
            waiting.setdefault(case.message, []).append(CASES[case.case].title)
            continue
        mark = Mark.PASS if case.passed else Mark.FAIL
        lines.append("  " + result_line(mark, CASES[case.case].title, case.message))
    for message, titles in waiting.items():
        what = titles[0] if len(titles) == 1 else f"{len(titles)} cases ({'; '.join(titles)})"
        lines.append("  " + result_line(Mark.NOT_STARTED, what, message))
    return lines


def summary_line(rows: list[Row], checkpoint: CheckpointStatus) -> str:
    functions = [r for r in rows if r.kind == "function"]
    beyond = [r for r in rows if r.kind == "beyond"]
    exercises = [r for r in rows if r.kind == "exercise"]

    def count(group: list[Row], status: Status) -> int:
        return sum(r.status == status for r in group)

    def passing(group: list[Row], what: str) -> str:
        said = f"{count(group, Status.PASSING)}/{len(group)} {what}PASSING"
        for status in (Status.FAILING, Status.NOT_STARTED):
            if count(group, status):
                said += f", {count(group, status)} {status}"
        return said

    parts = [passing(functions, "functions ")]
    if beyond:
        parts.append("beyond the book: " + passing(beyond, ""))
    parts.append(f"checkpoint {checkpoint}")
    words = [f"{count(exercises, Status.NOT_STARTED)} of {len(exercises)} not started"]
    if count(exercises, Status.FAILING):
        words.append(f"{count(exercises, Status.FAILING)} FAILING")
    if count(exercises, Status.LEFT_OUT):
        words.append(f"{count(exercises, Status.LEFT_OUT)} left out")
    parts.append("exercises: " + ", ".join(words))
    return " · ".join(parts)


def exit_status(rows: list[Row], checkpoint: CheckpointStatus, tampered: bool) -> int:
    """0 all passed; 1 something FAILING; 3 nothing failing, but work not started yet.

    A row beyond the book counts for none of them: the chapter's own code, which it does not
    ask for, passes make check with it FAILING."""
    failing = any(r.status == Status.FAILING for r in rows if r.kind != "beyond")
    if tampered or checkpoint == CheckpointStatus.FAILING or failing:
        return 1
    functions = [r for r in rows if r.kind == "function"]
    if checkpoint == CheckpointStatus.NOT_STARTED or any(
        r.status != Status.PASSING for r in functions
    ):
        return 3
    return 0
