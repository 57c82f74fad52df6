"""The checkpoint beside the suites: its child, watched case by case, then read by the judge.

The checkpoint (``checkpoints/ch13_worker_recovery.py``) runs the student's file in sandboxes
and writes its evidence as it goes; a thread here reads which case is running and stops the
child past a case's deadline, the whole checkpoint's, or the disk limit of its scratch. The
outcome is never the child's exit status nor its own "pass": ``lucyshop.lab.checkpoint.judge``
reads the evidence and the shop and supplier files each case kept, in this process, which
never imports the student's file.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from lucyshop.lab.check.guard import DISK_LIMIT, Limits, OwnGroupChild, disk_usage
from lucyshop.lab.check.results import CheckpointResult
from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.checkpoint import judge
from lucyshop.lab.checkpoint.launch import checkpoint_command
from lucyshop.lab.loader import ROOT, SOLUTIONS
from lucyshop.lab.statuses import CaseResult, CheckpointStatus

CHECKPOINT_LINES = 12  # of what the checkpoint printed last, shown when it FAILED
POLL = 0.2
NOT_A_STUB = "raised NotStarted, but no function of the file is still the stub"

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
        argv = checkpoint_command(
            path, evidence=self.evidence, keep=self.keep, case_timeout=limits.case
        )
        self.keep.mkdir()
        env = env | {"TMPDIR": str(tmp)}  # its sandboxes' directories go with the check's
        self.child = OwnGroupChild(
            argv, cwd=ROOT, env=env, log=tmp / "checkpoint.log", marker=marker
        )
        self.limits: Limits = limits
        self.stopped: tuple[str | None, str] | None = None  # (the case it was in, why)
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _current(self) -> str | None:
        try:
            cases = json.loads(self.evidence.read_text(encoding="utf-8"))["cases"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return next((n for n, c in cases.items() if c.get("result") == CaseResult.STARTED), None)

    def _why_stop(self, case: str | None, since: float, now: float) -> str | None:
        if now - self.child.started > self.limits.checkpoint:
            return f"the checkpoint did not finish within {self.limits.checkpoint:g} s"
        if case is not None and now - since > self.limits.case:
            return f"timed out after {self.limits.case:g} s"
        if disk_usage(self.keep) > DISK_LIMIT:
            return f"wrote over {DISK_LIMIT >> 20} MiB to its scratch"
        return None

    def _watch(self) -> None:
        case, since = None, time.monotonic()
        while self.child.poll() is None:
            now = time.monotonic()
            current = self._current()
            if current != case:
                case, since = current, now
            if why := self._why_stop(case, since, now):
                self.stopped = (case, why)
                self.child.kill()
                return
            time.sleep(POLL)

    def read(self, stubs: Mapping[str, str | None]) -> CheckpointResult:
        """Once the child is done: the judge's reading of what it kept, a stopped case failed
        with why, and what the child printed last (without the reference's source lines).
        NOT STARTED stands only while a chapter function is still the stub by its syntax
        (``stubs``): a NotStarted from the sandbox is the sandbox's word, not a fact."""
        self.thread.join()
        status, cases = judge.judge(self.evidence, self.keep)
        if status == CheckpointStatus.NOT_STARTED and not any(f in stubs for f in FUNCTIONS):
            status = CheckpointStatus.FAILED
            for case in cases:
                if not case.passed:
                    case.message = f"{NOT_A_STUB}: {case.message}"
        if self.stopped:
            name, why = self.stopped
            for case in cases:
                if case.name == name:
                    case.message = why
            status = CheckpointStatus.FAILED
        lines = [line for line in self.child.tail() if not line.startswith("evidence: ")]
        tail = without_reference_source(lines)[-CHECKPOINT_LINES:]
        return CheckpointResult(status, cases, tail)
