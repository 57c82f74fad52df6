"""The checkpoint beside the suites: its cases in children side by side, each watched case by
case, then read by the judge.

The checkpoint (``checkpoints/ch13_worker_recovery.py``) runs the student's file in sandboxes
and writes its evidence as it goes. Its cases are independent (each its own directory, shop
file, supplier and holder) and mostly wait out real leases, so ``make check`` deals them to
``CHILDREN`` checkpoint children (``--case N``) that wait side by side: the checkpoint takes
about its longest child, not the sum of its cases. A thread here reads which case each child
is running and stops a child past a case's deadline or the whole checkpoint's, and every child
past the disk limit of their shared scratch. The outcome is never a child's exit status nor
its own "pass": ``lucyshop.lab.checkpoint.judge`` reads each child's evidence and the shop
and supplier files each case kept, in this process, which never imports the student's file.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lucyshop.lab.check.guard import DISK_LIMIT, Limits, OwnGroupChild, disk_usage
from lucyshop.lab.check.results import CheckpointResult
from lucyshop.lab.check.subjects import FUNCTIONS
from lucyshop.lab.checkpoint import judge
from lucyshop.lab.checkpoint.cases import CASES, Case, CaseId
from lucyshop.lab.checkpoint.launch import checkpoint_command
from lucyshop.lab.loader import ROOT, SOLUTIONS
from lucyshop.lab.statuses import CaseResult, CheckpointStatus

# Checkpoint children side by side, case N going to child N mod CHILDREN: the cases that wait
# out a lease spread over them, and each child adds one process start to the check.
CHILDREN = 3
CHECKPOINT_LINES = 12  # of what the checkpoint printed last, shown when it is FAILING
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


def dealt_cases() -> list[tuple[CaseId, ...]]:
    """The cases of each checkpoint child, in order: case N to child N mod ``CHILDREN``."""
    return [CASES[n::CHILDREN] for n in range(min(CHILDREN, len(CASES)))]


@dataclass
class CheckpointPart:
    """One checkpoint child: its cases, its evidence file, the case it is in and since when,
    and why it was stopped, if it was (the case it was in, why)."""

    cases: tuple[CaseId, ...]
    evidence: Path
    child: OwnGroupChild
    case: str | None = None
    since: float = field(default_factory=time.monotonic)
    stopped: tuple[str | None, str] | None = None

    def current(self) -> str | None:
        """The case its evidence says is running."""
        try:
            cases = json.loads(self.evidence.read_text(encoding="utf-8"))["cases"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return next((n for n, c in cases.items() if c.get("result") == CaseResult.STARTED), None)

    def judged(self, keep: Path) -> tuple[CheckpointStatus, list[Case]]:
        """The judge's reading of this child's cases; a stopped case failed with why."""
        rules = {case.name: judge.RULES[case.name] for case in self.cases}
        status, cases = judge.judge(self.evidence, keep, rules)
        if self.stopped:
            name, why = self.stopped
            for case in cases:
                if case.name == name:
                    case.message = why
            status = CheckpointStatus.FAILING
        return status, cases


class Checkpoint:
    """The checkpoint's children and their watcher thread: a deadline per case and for the
    whole, and one disk limit for the scratch they share."""

    def __init__(
        self, path: Path, env: dict[str, str], tmp: Path, marker: str, limits: Limits
    ) -> None:
        self.keep = tmp / "checkpoint"  # every case's files, each in its own caseN directory
        self.keep.mkdir()
        env = env | {"TMPDIR": str(tmp)}  # its sandboxes' directories go with the check's
        self.parts: list[CheckpointPart] = []
        for number, cases in enumerate(dealt_cases()):
            evidence = tmp / f"evidence-{number}.json"  # outside every sandbox's scratch
            argv = checkpoint_command(
                path, evidence=evidence, keep=self.keep, case_timeout=limits.case
            )
            argv += [word for case in cases for word in ("--case", str(case.number))]
            log = tmp / f"checkpoint-{number}.log"
            child = OwnGroupChild(argv, cwd=ROOT, env=env, log=log, marker=marker)
            self.parts.append(CheckpointPart(cases, evidence, child))
        self.limits: Limits = limits
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _why_stop(self, part: CheckpointPart, now: float) -> str | None:
        if now - part.child.started > self.limits.checkpoint:
            return f"the checkpoint did not finish within {self.limits.checkpoint:g} s"
        if part.case is not None and now - part.since > self.limits.case:
            return f"timed out after {self.limits.case:g} s"
        return None

    def _watch(self) -> None:
        while running := [part for part in self.parts if part.child.poll() is None]:
            now = time.monotonic()
            full = disk_usage(self.keep) > DISK_LIMIT
            for part in running:
                current = part.current()
                if current != part.case:
                    part.case, part.since = current, now
                why = f"wrote over {DISK_LIMIT >> 20} MiB to its scratch" if full else None
                if why := why or self._why_stop(part, now):
                    part.stopped = (part.case, why)
                    part.child.kill()
            time.sleep(POLL)

    def read(self, stubs: Mapping[str, str | None]) -> CheckpointResult:
        """Once every child is done: the judge's reading of what they kept, in the cases'
        order, and what the children with a failed case printed last (without the
        reference's source lines). NOT STARTED stands only while a chapter function is
        still the stub by its syntax (``stubs``): a NotStarted from the sandbox is the
        sandbox's word, not a fact."""
        self.thread.join()
        judged = [(part, *part.judged(self.keep)) for part in self.parts]
        statuses = {status for _part, status, _cases in judged}
        cases = sorted((case for *_, found in judged for case in found), key=lambda c: c.case)
        unpassed = (CheckpointStatus.FAILING, CheckpointStatus.NOT_STARTED)  # the first found
        status = next((s for s in unpassed if s in statuses), CheckpointStatus.PASSING)
        if status == CheckpointStatus.NOT_STARTED and not any(f in stubs for f in FUNCTIONS):
            status = CheckpointStatus.FAILING
            for case in cases:
                if not case.passed:
                    case.message = f"{NOT_A_STUB}: {case.message}"
        failed = [part for part, _status, found in judged if not all(c.passed for c in found)]
        lines = [line for part in failed for line in part.child.tail()]
        lines = [line for line in lines if not line.startswith("evidence: ")]
        tail = without_reference_source(lines)[-CHECKPOINT_LINES:]
        return CheckpointResult(status, cases, tail)
