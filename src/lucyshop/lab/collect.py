"""A pytest plugin for ``make check``: each test's outcome, one JSON object a line.

    python -m pytest tests/learner -p lucyshop.lab.collect --outcomes FILE

Lines are appended as the run goes (``start`` when a test begins, ``result`` when it ends,
``collect_error`` for a module that cannot be imported), so a run stopped by a timeout still
says which test was running. A failure is boiled down to one line: the first line of the
failed expectation, or the exception a function raised and where in the implementation, or,
for a stub, which function is not started (``not_started``) and the notebook section.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from lucyshop.lab.loader import ENV, ImplementationError, impl_path
from lucyshop.lab.stubs import NotStarted

MESSAGE_CHARS = 200


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--outcomes",
        metavar="FILE",
        default=None,
        help="append each test's outcome to FILE as JSON lines",
    )


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--outcomes")
    if target:
        config.pluginmanager.register(
            Outcomes(Path(target), _impl_file(config)), "lucyshop-outcomes"
        )


def _impl_file(config: pytest.Config) -> Path | None:
    spec = config.getoption("--impl", default=None) or os.environ.get(ENV) or "learner"
    try:
        return impl_path(spec)
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
    if isinstance(error, (AssertionError, pytest.fail.Exception)):
        return {"message": one_line(str(error)) or "an expectation failed", "not_started": None}
    message = f"{type(error).__name__}: {one_line(str(error))}".rstrip(": ")
    if impl_file is not None:
        lines = [entry.lineno + 1 for entry in excinfo.traceback if Path(entry.path) == impl_file]
        if lines:
            message += f" (line {lines[-1]} of {impl_file.name})"
    return {"message": message, "not_started": None}


class Outcomes:
    def __init__(self, path: Path, impl_file: Path | None) -> None:
        self.path = path
        self.impl_file = impl_file
        self.failed: dict[str, dict[str, Any]] = {}
        self.skipped: set[str] = set()
        self.path.write_text("")

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")

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
        elif report.skipped:
            self.skipped.add(item.nodeid)
        return report

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        failure = self.failed.get(nodeid)
        outcome = "failed" if failure else "skipped" if nodeid in self.skipped else "passed"
        record = {
            "event": "result",
            "nodeid": nodeid,
            "module": Path(location[0]).stem,
            "outcome": outcome,
        }
        self.write(record | (failure or {}))

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
