"""A pytest plugin for ``make check``: each test's outcome, one JSON object a line.

    python -m pytest spec/learner -p lucyshop.lab.check.plugin.collect --outcomes FILE

Lines are appended as the run goes (``collected`` with each module's count of tests, ``start``
when a test begins, ``result`` when it ends, ``collect_error`` for a module that cannot be
imported), so a run stopped by a timeout still says which test was running. A failure is
boiled down to one line: the first line of the failed expectation, or the exception a
function raised and where in the implementation, or, for a stub, which function is not started
(``not_started``) and the notebook section.

A test that runs past its deadline (pytest-timeout) says "timed out after 30 s in claim()".
From then on, in this run and in any rerun the report starts with ``--hung claim`` (after a
hang or a process that died in a test of it), every freshly loaded implementation has that
function replaced by one that fails at once (``blocked_by``), so one hung function costs one
deadline, not one per test that needs it.
``KeyboardInterrupt`` from the code under test fails that test instead of ending the run.
A skipped, xfailed or xpassed test is not a pass: it is recorded failed, "did not run".

This plugin runs in the trusted pytest process; the student's code runs in the sandboxed
worker (``lucyshop.lab.sandbox``), so nothing the student writes can reach these records.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from lucyshop.lab.check.subjects import deadline_of
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ImplementationError, after_load, chapter_of
from lucyshop.lab.sandbox.errors import CallTimedOut, TimedOutBefore, WorkerDied
from lucyshop.lab.services.limits import MEASURED_TEST_SECONDS, TEST_SECONDS

MESSAGE_CHARS = 200
BACKSTOP = 5.0  # pytest-timeout's margin past a test's deadline (the sandbox's fires first)
_TIMEOUT = re.compile(r"Timeout \(>([0-9.]+)s\)")


class StoppedTheRun(RuntimeError):
    """The code under test raised KeyboardInterrupt, which would end the whole run."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--deadline",
        type=float,
        default=TEST_SECONDS,
        metavar="S",
        help=(
            f"seconds for one test (default {TEST_SECONDS:g}; the measured exercises:"
            f" {MEASURED_TEST_SECONDS:g})"
        ),
    )
    parser.addoption(
        "--outcomes",
        metavar="FILE",
        default=None,
        help="append each test's outcome to FILE as JSON lines",
    )
    parser.addoption(
        "--hung",
        action="append",
        default=[],
        metavar="FUNCTION",
        help="a function that already timed out: it fails at once in every test",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "deadline(seconds): what the test's sandbox calls may take")
    target = config.getoption("--outcomes")
    if target:
        outcomes = OutcomeWriter(Path(target), _impl_file(config), config.getoption("--hung"))
        config.pluginmanager.register(outcomes, "lucyshop-outcomes")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's deadline: its calls into the sandbox share it (``deadline``), and
    pytest-timeout, when installed, stops the test a little later, as a backstop for the
    trusted side itself."""
    default = config.getoption("--deadline")
    for item in items:
        seconds = deadline_of(item.nodeid, default)
        item.add_marker(pytest.mark.deadline(seconds))
        item.add_marker(pytest.mark.timeout(seconds + BACKSTOP))


def _impl_file(config: pytest.Config) -> Path | None:
    try:
        return chapter_of(config.getoption("--impl", default=None))
    except ImplementationError:
        return None


def one_line(text: str) -> str:
    """The first non-empty line, whitespace collapsed, cut to a readable length."""
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


def not_started(error: BaseException | None) -> NotStarted | None:
    """The NotStarted behind ``error``, following its cause and context, if any."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, NotStarted):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def describe(
    excinfo: pytest.ExceptionInfo[BaseException], impl_file: Path | None
) -> dict[str, Any]:
    error = excinfo.value
    stub = not_started(error)
    if stub is not None:
        return {
            "message": one_line(str(stub)),
            "not_started": stub.function,
            "section": stub.section,
        }
    own = [e for e in excinfo.traceback if impl_file is not None and Path(e.path) == impl_file]
    timeout = _TIMEOUT.search(str(error)) if isinstance(error, pytest.fail.Exception) else None
    if timeout:
        seconds = float(timeout.group(1))
        name = own[-1].name if own else innermost(error, impl_file)
        where = f" in {name}()" if name else ""
        found = {"message": f"timed out after {seconds:g} s{where}", "timed_out": seconds}
        return found | {"hung": name, "not_started": None}
    if isinstance(error, (CallTimedOut, WorkerDied)):  # in the sandbox: the worker was ended
        found = {"message": one_line(str(error)), "hung": error.function, "not_started": None}
        return found | ({"timed_out": error.seconds} if isinstance(error, CallTimedOut) else {})
    if isinstance(error, TimedOutBefore):
        return {"message": str(error), "blocked_by": error.function, "not_started": None}
    if isinstance(error, (AssertionError, pytest.fail.Exception)):
        return {"message": one_line(str(error)) or "an expectation failed", "not_started": None}
    message = f"{type(error).__name__}: {one_line(str(error))}".rstrip(": ")
    where = getattr(error, "sandbox_where", None)  # the student's innermost line, in the worker
    if where is not None:
        message += f" (line {where[2]} of {where[0]})"
    elif own:
        message += f" (line {own[-1].lineno + 1} of {impl_file.name})"
    return {"message": message, "not_started": None}


def innermost(error: BaseException, impl_file: Path | None) -> str | None:
    """The innermost function of ``impl_file`` in the raw traceback (pytest's may be cut)."""
    name, tb = None, error.__traceback__
    while tb is not None:
        if impl_file is not None and tb.tb_frame.f_code.co_filename == str(impl_file):
            name = tb.tb_frame.f_code.co_name
        tb = tb.tb_next
    return name


def fail_fast(module: ModuleType, hung: set[str]) -> None:
    """Replace each hung function of a freshly loaded implementation with one that fails."""
    for function in hung:
        if callable(getattr(module, function, None)):

            def failing(*_args: Any, _function: str = function, **_kwargs: Any) -> None:
                raise TimedOutBefore(_function)

            setattr(module, function, failing)


class OutcomeWriter:
    def __init__(self, path: Path, impl_file: Path | None, hung: list[str] = ()) -> None:
        self.path = path
        self.impl_file = impl_file
        self.hung = set(hung)
        after_load(lambda module: fail_fast(module, self.hung))
        self.failed: dict[str, dict[str, Any]] = {}
        self.path.write_text("")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        try:
            return (yield)
        except KeyboardInterrupt as error:
            raise StoppedTheRun(f"KeyboardInterrupt raised by the code under test: {error}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        try:
            return (yield)
        except KeyboardInterrupt as error:
            raise StoppedTheRun(f"KeyboardInterrupt raised by the code under test: {error}")

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """How many tests each module has, before ``--deselect`` leaves out those a rerun
        need not run again: the count a row's results are held to."""
        counts = Counter(Path(item.nodeid.split("::")[0]).stem for item in items)
        self.write({"event": "collected", "counts": dict(counts)})

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.write({"event": "start", "nodeid": nodeid})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = yield
        if report.failed and item.nodeid not in self.failed:
            found = (
                describe(call.excinfo, self.impl_file) if call.excinfo else {"message": "failed"}
            )
            self.failed[item.nodeid] = {"when": report.when, "not_started": None} | found
            if found.get("hung"):
                self.hung.add(found["hung"])
        elif report.skipped and item.nodeid not in self.failed:
            # A skip, an xfail or an xpass is not a pass: the test did not run to its end.
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            self.failed[item.nodeid] = {
                "when": report.when,
                "not_started": None,
                "message": one_line(f"did not run ({reason})" if reason else "did not run"),
            }
        return report

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        failure = self.failed.get(nodeid)
        outcome = "failed" if failure else "passed"
        record = {
            "event": "result",
            "nodeid": nodeid,
            "module": Path(location[0]).stem,
            "outcome": outcome,
        }
        self.write(record | (failure or {}))

    def pytest_sessionfinish(self) -> None:
        """The run reached its end: a process that exits without this line died in a test."""
        self.write({"event": "finish"})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = str(report.longrepr)
            errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
            self.write(
                {
                    "event": "collect_error",
                    "nodeid": report.nodeid,
                    "module": Path(report.nodeid.split("::")[0]).stem,
                    "outcome": "failed",
                    "message": one_line(errors[-1] if errors else text),
                    "not_started": None,
                }
            )
