"""What one ``make check`` came to, and its ``ch13-check/2`` JSON: the one module of the contract.

A ``Result`` holds every ``Row`` of the table (a function or an exercise, with its status and
each failing test), the checkpoint's status and cases as the judge read them, the summary line
and the whole feedback as printed. ``--json FILE`` writes it (``write_json``); ``make grade``
reads it back from a child (``lucyshop.lab.grade.verdict``). Both sides hold the document to
``schemas/check.json`` (``problems``), so a field renamed on one side fails on both.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lucyshop.atomic import write_text
from lucyshop.lab.checkpoint.cases import Case
from lucyshop.lab.evidence.receipts import validate
from lucyshop.lab.statuses import CheckpointStatus, Status

SCHEMA = "ch13-check/2"
SCHEMA_FILE = "check"  # schemas/check.json


@dataclass
class Failure:
    """One failing test of a row: its node id, what failed in one line, the command to rerun it."""

    test: str
    message: str
    rerun: str


@dataclass
class Row:
    """One line of the table: a chapter function or an exercise."""

    label: str
    kind: str  # "function", "beyond" (a row beyond the book) or "exercise"
    status: Status
    passed: int = 0
    total: int = 0
    message: str = ""
    failures: list[Failure] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        """A row as ``asdict`` wrote it (in a check's JSON, or a grade kept on disk)."""
        failures = [Failure(**failure) for failure in data.get("failures", [])]
        return cls(**(data | {"status": Status(data["status"]), "failures": failures}))


def case_from_dict(data: dict[str, Any]) -> Case:
    """A checkpoint case as ``asdict`` wrote it."""
    return Case(int(data["case"]), data["name"], bool(data["passed"]), data.get("message", ""))


@dataclass
class CheckpointResult:
    """The checkpoint: its status and cases, read by the judge from the files it kept (never
    from its exit status), and the last lines it printed."""

    status: CheckpointStatus = CheckpointStatus.SKIPPED
    cases: list[Case] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), never sent: an
    escape sequence from a student's message cannot redraw or hide a row."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


@dataclass
class Result:
    """One check: printed as it goes (``say``) unless ``echo`` is off, kept whole for
    ``--json``."""

    impl: str
    exit: int = 2
    summary: str = ""
    error: str | None = None
    rows: list[Row] = field(default_factory=list)
    checkpoint: CheckpointResult = field(default_factory=CheckpointResult)
    feedback: list[str] = field(default_factory=list)
    echo: bool = field(default=True, repr=False, compare=False)  # never part of the JSON

    def say(self, line: str = "") -> None:
        line = printable(line)  # text from the student's code never drives the terminal
        if self.echo:
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
            "checkpoint": asdict(self.checkpoint),
            "feedback": "\n".join(self.feedback) + "\n",
        }


class BrokenContract(ValueError):
    """A document that does not follow ``ch13-check/2``: every way it breaks, one line each."""


def problems(data: Any) -> list[str]:
    """Every way ``data`` breaks ``schemas/check.json``, one line each; ``[]``: none."""
    return validate(data, SCHEMA_FILE)


def checked(data: Any) -> dict[str, Any]:
    """``data`` itself when it follows the contract; else ``BrokenContract`` says how not."""
    if not isinstance(data, dict):
        raise BrokenContract(f"a {SCHEMA} document is a JSON object, not {type(data).__name__}")
    if found := problems(data):
        raise BrokenContract(f"it breaks {SCHEMA} ({SCHEMA_FILE}.json): {'; '.join(found)}")
    return data


def write_json(result: Result, path: Path) -> None:
    """Write ``result`` as ``ch13-check/2``, whole or not at all, once it follows the schema."""
    document = checked(json.loads(json.dumps(result.as_json())))  # as a reader will see it
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(document, indent=2) + "\n")
