"""The verdict on one staged file: ``make check`` run as a child, read from its JSON.

    python -m lucyshop.lab.check --impl PATH [--no-checkpoint] --json FILE

The child gets its own temporary directory (``TMPDIR``), its own process group and a deadline;
its output is drained while it runs and only a bounded head and tail are kept, so a file that
prints megabytes costs memory of neither the grader nor the child. The grade is read from the
JSON the check writes, never from the exit status alone, and only once that JSON follows the
``ch13-check/2`` contract (``schemas/check.json``, ``lucyshop.lab.check.results``): a document
that breaks it is the grader's CHECK ERROR, saying how, never a grade.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from lucyshop import IMPL_ENV
from lucyshop.lab.check.guard import MARKER, Limits, new_marker, sweep
from lucyshop.lab.check.results import BrokenContract, Row, case_from_dict, checked
from lucyshop.lab.checkpoint.cases import Case
from lucyshop.lab.loader import ROOT
from lucyshop.lab.services.groups import end_group
from lucyshop.lab.statuses import CheckpointStatus, VerdictStatus

HEAD_BYTES = 16_384
TAIL_BYTES = 65_536
KILL_WAIT = 10.0
POLL = 0.25  # seconds between looks at the deadline and the stop flag


@dataclass
class Verdict:
    """What one check of one file came to, or why it came to nothing (``status`` not CHECKED).

    Its rows are the check's own (``lucyshop.lab.check.results.Row``), its cases the judge's."""

    status: VerdictStatus
    rows: list[Row] = field(default_factory=list)
    checkpoint: CheckpointStatus = CheckpointStatus.SKIPPED
    cases: list[Case] = field(default_factory=list)
    feedback: str = ""
    error: str = ""
    seconds: float = 0.0

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        """The verdict ``asdict`` wrote (a kept result of an earlier run)."""
        rows = [Row.from_dict(row) for row in data.get("rows", [])]
        cases = [case_from_dict(case) for case in data.get("cases", [])]
        status = VerdictStatus(data["status"])
        checkpoint = CheckpointStatus(data.get("checkpoint", CheckpointStatus.SKIPPED))
        return cls(
            **(data | {"status": status, "rows": rows, "checkpoint": checkpoint, "cases": cases})
        )


@dataclass
class Output:
    """A bounded record of a child's output: its first and last bytes, and how many in all."""

    head: bytearray = field(default_factory=bytearray)
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL_BYTES))
    size: int = 0

    def add(self, chunk: bytes) -> None:
        if len(self.head) < HEAD_BYTES:
            self.head += chunk[: HEAD_BYTES - len(self.head)]
        self.tail.extend(chunk)
        self.size += len(chunk)

    def text(self) -> str:
        if self.size <= TAIL_BYTES:
            return bytes(self.tail).decode("utf-8", "replace")
        cut = self.size - len(self.head) - len(self.tail)
        head = bytes(self.head).decode("utf-8", "replace")
        tail = bytes(self.tail).decode("utf-8", "replace")
        return f"{head}\n[... {max(cut, 0)} bytes of output left out ...]\n{tail}"


def run_check_child(
    chapter: Path,
    tmp: Path,
    *,
    timeout: float,
    checkpoint: bool = True,
    stop: threading.Event | None = None,
    limits: Limits | None = None,
) -> tuple[int | None, str, dict | None]:
    """Run ``make check`` on ``chapter`` with ``tmp`` as its TMPDIR: (exit or None, output, JSON).

    The exit is None when the deadline passed (or ``stop`` was set: the grader is being
    interrupted); either way the child's whole process group is killed.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    result = tmp / "check.json"
    argv = [sys.executable, "-m", "lucyshop.lab.check", "--impl", str(chapter)]
    argv += ["--json", str(result)]
    argv += [] if checkpoint else ["--no-checkpoint"]
    argv += (limits or Limits()).argv()  # make check's own deadlines when None
    marker = new_marker()  # the check's children carry it: they are swept even past a kill
    env = os.environ | {
        "TMPDIR": str(tmp),
        IMPL_ENV: str(chapter),
        MARKER: marker,
    }
    env.pop("PYTEST_ADDOPTS", None)
    try:
        status, output = _bounded(argv, env, timeout, stop or threading.Event())
    finally:
        sweep(marker)  # what the check started in sessions of its own, outside its group
    data = None
    if result.is_file():
        try:
            data = json.loads(result.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
    return status, output.text(), data


def _bounded(
    argv: list[str], env: dict[str, str], timeout: float, stop: threading.Event
) -> tuple[int | None, Output]:
    """Run ``argv`` until it exits, the deadline passes or ``stop`` is set; then end its group."""
    output = Output()
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    reader = threading.Thread(target=_drain, args=(proc.stdout, output), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    status = None
    try:
        while status is None and time.monotonic() < deadline and not stop.is_set():
            try:
                status = proc.wait(timeout=POLL)
            except subprocess.TimeoutExpired:
                pass
    finally:
        end_group(proc, KILL_WAIT)  # also whatever the file started and left behind
        reader.join(timeout=KILL_WAIT)  # a daemon a file escaped into may still hold the pipe
    return status, output


def _drain(stream: BinaryIO, output: Output) -> None:
    """Read until the last writer closes the pipe; the reader alone closes it."""
    with stream:
        while chunk := stream.read1(65_536):
            output.add(chunk)


def verdict_on(
    chapter: Path,
    tmp: Path,
    *,
    timeout: float,
    checkpoint: bool = True,
    stop: threading.Event | None = None,
    limits: Limits | None = None,
) -> Verdict:
    """The verdict on ``chapter``, from the check's ``ch13-check/2`` JSON, never its exit.

    ``limits`` bound each test, checkpoint case and the import inside the check.
    """
    started = time.monotonic()
    status, output, data = run_check_child(
        chapter, tmp, timeout=timeout, checkpoint=checkpoint, stop=stop, limits=limits
    )
    if status is None and stop is not None and stop.is_set():
        error = "the grader was interrupted before the check ended"
        verdict = Verdict(VerdictStatus.STOPPED, error=error)
    elif status is None:
        error = f"the check did not finish within {timeout:g}s"
        verdict = Verdict(VerdictStatus.TIMED_OUT, feedback=output, error=error)
    elif data is not None:
        verdict = from_json(data, output)
    else:
        error = f"the check wrote no result (exit {status})"
        verdict = Verdict(VerdictStatus.CHECK_ERROR, feedback=output, error=error)
    verdict.seconds = time.monotonic() - started
    return verdict


def from_json(data: object, output: str) -> Verdict:
    """A verdict from the check's ``ch13-check/2`` document; CHECK ERROR, saying how, for a
    document that breaks the contract."""
    try:
        document = checked(data)
    except BrokenContract as broken:
        feedback = data.get("feedback") if isinstance(data, dict) else None
        return Verdict(
            VerdictStatus.CHECK_ERROR,
            feedback=feedback if isinstance(feedback, str) else output,
            error=f"the check's result cannot be read: {broken}",
        )
    feedback = document["feedback"] or output
    if document["error"]:
        return Verdict(VerdictStatus.CANNOT_CHECK, feedback=feedback, error=document["error"])
    point = document["checkpoint"]
    return Verdict(
        VerdictStatus.CHECKED,
        [Row.from_dict(row) for row in document["rows"]],
        CheckpointStatus(point["status"]),
        [case_from_dict(case) for case in point["cases"]],
        feedback,
    )
