"""The checkpoints' runner: their command line, a sandbox per case, the evidence file, the line
each case prints, and the judge's result at the end.

    python checkpoints/ch13_worker_recovery.py [--impl learner|solutions|PATH]
                                               [--evidence FILE] [--lease SECONDS] [--case N]
                                               [--keep DIR] [--case-timeout SECONDS]
    python checkpoints/ch13_postgres_recovery.py  (the same options)

A checkpoint file holds only its cases and ends with ``main(globals())`` (exercise 7's with
``main(globals(), POSTGRES)``): this module finds one function there for each of the
checkpoint's cases (``CheckpointPlan.cases``, from ``lucyshop.lab.checkpoint.cases``, each
named after its case), runs the cases chosen in order, each with a sandbox of its own whose
only writable place is the case's directory and whose calls share the case's time limit
(``--case-timeout``, the one ``make check`` stops a case at), and writes
what it observed (``Run``) and nothing else to the evidence. Whatever the student's code
raises fails that case by name. This process never imports the student's code; still, the
result that counts is the judge's, read from the evidence and the files each case kept, and
so is the exit status.

Exit status: 0 every case passed, 1 a case failed, 3 the implementation is still a stub.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import CASES, CaseId
from lucyshop.lab.checkpoint.expectations import ExpectationFailed, refused_at
from lucyshop.lab.checkpoint.judge import EXIT, RULES, Rule, judge, kept_directory, said
from lucyshop.lab.evidence import receipts
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ROOT, ReferenceBlocked, add_impl_option, impl_path
from lucyshop.lab.sandbox import Sandbox, describe
from lucyshop.lab.sandbox.jail import remove_tree
from lucyshop.lab.services.limits import CASE_SECONDS
from lucyshop.lab.statuses import CaseResult, Mark, result_line

CaseFunction = Callable[
    ["Run", Any, Path], dict[str, Any]
]  # (run, what the checkpoint's sandbox hands its cases, directory)


@dataclass(frozen=True)
class CheckpointPlan:
    """What one checkpoint runs: a title, its cases, the judge's rules of them, and the student
    file it rules (``student_file`` beside the chapter file, or the chapter file itself);
    this one's sandbox hands its cases the chapter file."""

    title: str
    cases: tuple[CaseId, ...]
    rules: Mapping[str, Rule]
    student_file: str | None = None

    def student_path(self, impl: Path) -> Path:
        """The student file this checkpoint rules, for the chapter file ``impl``."""
        return impl if self.student_file is None else impl.with_name(self.student_file)

    def missing(self) -> str | None:
        """Why the checkpoint cannot run here (a service it needs), else None."""
        return None

    @contextmanager
    def services(self) -> Iterator[Any]:
        """What every case of a run shares (nothing here; a PostgreSQL server there)."""
        yield None

    @contextmanager
    def sandbox(
        self, shared: Any, impl: Path, directory: Path, workdir: Path, seconds: float
    ) -> Iterator[Any]:
        """A sandbox of the case's own, whose only writable place is ``directory`` and whose
        calls may take ``seconds`` in all; what it yields is what the case functions get.
        ``shared``: what ``services`` yielded."""
        with Sandbox(impl, scratch=[directory], workdir=workdir, shown=receipts.shown(impl)) as box:
            box.share(directory)
            yield box.load(seconds=seconds)


SQLITE = CheckpointPlan("checkpoint 13", CASES, RULES)


@dataclass
class Run:
    """What this run observed: the evidence file is written from this and nothing else."""

    impl: Path
    lease: float
    client_timeout: float
    started: float = field(default_factory=time.time)
    provenance: dict[str, Any] = field(default_factory=dict)  # receipts.provenance, at the start
    timeline: list[dict[str, Any]] = field(default_factory=list)
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)

    def event(self, case: str, what: str, **facts: Any) -> None:
        self.timeline.append(
            {"t": round(time.time() - self.started, 4), "case": case, "event": what, **facts}
        )


def case_functions(
    namespace: Mapping[str, Any], cases: tuple[CaseId, ...] = CASES
) -> dict[CaseId, CaseFunction]:
    """Each case's function in the checkpoint's ``namespace``, in the order of ``cases``."""
    missing = [case.function for case in cases if not callable(namespace.get(case.function))]
    if missing:
        raise LookupError(f"the checkpoint defines no function for {', '.join(missing)}")
    return {case: namespace[case.function] for case in cases}


def summary(facts: dict[str, Any]) -> str:
    """One line of what a case observed (never a constant)."""
    parts = []
    if "exit_status" in facts:
        parts.append(f"exit {facts['exit_status']}")
    if "generations" in facts:
        parts.append("generation " + "->".join(map(str, facts["generations"])))
    if "outcome" in facts:
        parts.append(facts["outcome"])
    if "ledger_count" in facts:
        parts.append(f"ledger {facts['ledger_count']} order")
    if "stale_child_reported" in facts:
        parts.append("stale " + "/".join(refused_at(facts["stale_child_reported"])) + " refused")
    if "refused" in facts:
        parts.append("stale " + "/".join(refused_at(facts["refused"])) + " refused")
    if "model_calls" in facts:
        parts.append(f"model calls {facts['model_calls']}")
    if "waited_seconds" in facts:
        parts.append(f"waited {facts['waited_seconds']:.2f}s")
    if "orders_after_cancel" in facts:
        parts.append(
            "orders "
            + "/".join(facts["orders_after_cancel"])
            + " after cancel, reconciled "
            + "/".join(r["after"] for r in facts["reconciled"])
        )
    if "p50" in facts:
        parts.append(f"p50 {facts['p50']} p90 {facts['p90']} delay {facts['detection_delay']:.3f}")
    return ", ".join(parts)


INTERRUPTED: list[int] = []  # SIGINT received: a KeyboardInterrupt that is the user's


def _interrupted(signum: int, _frame: Any) -> None:
    INTERRUPTED.append(signum)
    raise KeyboardInterrupt


def run_case(
    run: Run, leases: Any, case: CaseId, function: CaseFunction, directory: Path, rerun: str
) -> tuple[dict[str, Any], str]:
    """Run one case: (its evidence record, the line to print). Whatever the student's code
    raises, ``SystemExit`` and ``KeyboardInterrupt`` included, fails this case by name."""
    title = case.title
    again = f"      rerun: {rerun} --case {case.number}"
    try:
        facts = function(run, leases, directory)
    except NotStarted as stub:
        record = {"result": CaseResult.NOT_STARTED, "function": stub.function, "message": str(stub)}
        return record, result_line(Mark.NOT_STARTED, title, str(stub))
    except ReferenceBlocked as blocked:
        record = {"result": CaseResult.FAILING, "message": str(blocked)}
        return record, result_line(Mark.FAIL, title, str(blocked))
    except ExpectationFailed as failed:
        record = {
            "result": CaseResult.FAILING,
            "expectation": failed.expectation,
            "expected": repr(failed.expected),
            "seen": repr(failed.seen),
            "message": str(failed),
        }
        return record, result_line(Mark.FAIL, title, f"{failed}\n{again}")
    # A student's code may raise anything, SystemExit included: fail this case and say where.
    except BaseException as error:
        if INTERRUPTED:
            raise  # a real Ctrl-C stops the checkpoint; a KeyboardInterrupt raised by code fails
        kind = type(error).__name__
        where = traceback.extract_tb(error.__traceback__)[-1]
        stopped = " (it tried to stop the checkpoint)" if not isinstance(error, Exception) else ""
        message = f"{kind}{stopped}: {error}"
        record = {"result": CaseResult.FAILING, "error": message, "message": message}
        at = f"\n      at {where.filename}:{where.lineno}\n{again}"
        return record, result_line(Mark.FAIL, title, message + at)
    passed = result_line(Mark.PASS, title, summary(facts))
    return {"result": CaseResult.PASSING} | facts, passed


def main(
    namespace: Mapping[str, Any], checkpoint: CheckpointPlan = SQLITE, argv: list[str] | None = None
) -> int:
    """The checkpoint whose case functions are in ``namespace`` (its file's ``globals()``)."""
    functions = case_functions(namespace, checkpoint.cases)
    here = Path(namespace["__file__"]).resolve()
    parser = argparse.ArgumentParser(description=namespace["__doc__"].split("\n", 1)[0])
    add_impl_option(parser)
    parser.add_argument("--evidence", type=Path)
    parser.add_argument(
        "--lease", type=float, default=2.0, help="real lease in seconds (default 2)"
    )
    parser.add_argument(
        "--case",
        type=int,
        action="append",
        choices=[case.number for case in checkpoint.cases],
        help="run only this case (again for more): "
        + ", ".join(f"{case.number} {case.name}" for case in checkpoint.cases),
    )
    parser.add_argument(
        "--keep", type=Path, help="keep each case's shop and ledger under this directory"
    )
    parser.add_argument(
        "--case-timeout",
        type=float,
        default=CASE_SECONDS,
        help=f"seconds one case may take (default {CASE_SECONDS:g}, make check's)",
    )
    args = parser.parse_args(argv)
    if not math.isfinite(args.case_timeout) or args.case_timeout <= 0:
        parser.error("--case-timeout must be a positive number of seconds")
    if not math.isfinite(args.lease) or not 0.5 <= args.lease < args.case_timeout:
        parser.error("--lease must be at least 0.5 seconds and shorter than a case's limit")
    if reason := checkpoint.missing():
        print(f"SKIP  {checkpoint.title} needs {reason}")
        return 1
    impl = impl_path(args.impl)
    signal.signal(signal.SIGINT, _interrupted)
    run = Run(impl=impl, lease=args.lease, client_timeout=round(args.lease * 0.4, 3))
    command = sys.argv if argv is None else [str(here), *argv]
    run.provenance = receipts.provenance(
        command=command, code=sorted({impl, checkpoint.student_path(impl)})
    )
    root = args.keep or Path(tempfile.mkdtemp(prefix="ch13-checkpoint-"))
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="ch13-checkpoint-sandbox-"))
    try:
        with checkpoint.services() as shared:
            places = (root, workdir, shared)
            return run_cases(run, args, places, checkpoint, functions, here)
    finally:
        remove_tree(workdir)
        if args.keep is None:
            remove_tree(root)


def run_cases(
    run: Run,
    args: argparse.Namespace,
    places: tuple[Path, Path, Any],
    checkpoint: CheckpointPlan,
    functions: dict[CaseId, CaseFunction],
    here: Path,
) -> int:
    """Every case chosen, each with a sandbox of its own whose only writable place is the
    case's directory under ``places``' first (the second is where the sandboxes are made, the
    third what the checkpoint's services are); then the judge's result, and its exit status."""
    root, workdir, shared = places
    print(
        f"{checkpoint.title} on {checkpoint.student_path(run.impl)} (lease {run.lease:g}s,"
        f" supplier timeout {run.client_timeout:g}s; {describe()})"
    )
    python = os.path.relpath(sys.executable) if sys.prefix != sys.base_prefix else "python"
    rerun = f"{python} {here.relative_to(ROOT)} --impl {shlex.quote(str(args.impl))}"
    evidence = args.evidence or workdir / "evidence.json"  # out of every sandbox's reach
    chosen = [c for c in checkpoint.cases if not args.case or c.number in args.case]
    lines = Lines()
    for case in chosen:
        number, name = case.number, case.name
        run.cases[name] = {"case": number, "result": CaseResult.STARTED}
        write_evidence(evidence, run, None)  # a case that ends the process is named by this
        directory = root / f"case{number}"
        for fresh in (directory, kept_directory(directory)):
            remove_tree(fresh)
            fresh.mkdir(parents=True)
        with ExitStack() as stack:
            box = checkpoint.sandbox(
                shared, run.impl, directory, workdir / f"case{number}", args.case_timeout
            )
            try:
                given = stack.enter_context(box)
            except ReferenceBlocked as blocked:
                lines.flush()
                print(result_line(Mark.FAIL, "reference blocked", str(blocked)))
                return 1
            except Exception as error:  # noqa: BLE001 - say why, as a case's failure
                why = f"no sandbox loaded {checkpoint.student_path(run.impl)}: {first_line(error)}"
                run.cases[name] = {"case": number, "result": CaseResult.FAILING, "message": why}
                lines.add(case, run.cases[name], result_line(Mark.FAIL, case.title, why))
                break  # every later case would load the same file
            record, line = run_case(run, given, case, functions[case], directory, rerun)
        run.cases[name] = {"case": number} | record
        lines.add(case, record, line)
        write_evidence(evidence, run, None)
    lines.flush()
    outcome = end_status(run, evidence, root, {c.name: checkpoint.rules[c.name] for c in chosen})
    if args.evidence:
        print(f"evidence: {args.evidence}")
    return outcome


class Lines:
    """The cases' result lines, printed in order as they come; consecutive cases that stopped
    at the same stub share one line, which names them all (the stubs' run says each stub once,
    not once per case)."""

    def __init__(self) -> None:
        self.stalled: list[CaseId] = []  # stopped at ``self.stub``, not printed yet
        self.stub = ""

    def add(self, case: CaseId, record: dict[str, Any], line: str) -> None:
        stub = record["message"] if record.get("result") == CaseResult.NOT_STARTED else None
        if stub is not None and self.stalled and stub == self.stub:
            self.stalled.append(case)
            return
        self.flush()
        if stub is None:
            print(line, flush=True)
        else:
            self.stalled, self.stub = [case], stub

    def flush(self) -> None:
        if len(self.stalled) == 1:
            print(result_line(Mark.NOT_STARTED, self.stalled[0].title, self.stub), flush=True)
        elif self.stalled:
            numbers = [case.number for case in self.stalled]
            run = numbers == list(range(numbers[0], numbers[-1] + 1))
            span = f"{numbers[0]}-{numbers[-1]}" if run else ", ".join(map(str, numbers))
            print(result_line(Mark.NOT_STARTED, f"cases {span}", self.stub), flush=True)
        self.stalled = []


def first_line(error: BaseException) -> str:
    """``Type: message``, the message's first line only."""
    said = str(error).splitlines()
    return f"{type(error).__name__}: {said[0]}" if said else type(error).__name__


def end_status(run: Run, evidence: Path, root: Path, rules: Mapping[str, Rule]) -> int:
    """The judge's result on the cases run, from the evidence and the files they kept: a case
    the run passed but the judge does not is failed here, saying why; its exit status."""
    status, found = judge(evidence, root, rules)
    for case in found:
        said_pass = run.cases.get(case.name, {}).get("result") == CaseResult.PASSING
        if said_pass and not case.passed:
            print(result_line(Mark.FAIL, CASES[case.case].title, case.message))
    outcome = EXIT[status]
    passed = sum(case.passed for case in found)
    print(f"{said(status)} ({passed}/{len(found)} cases, {time.time() - run.started:.1f}s)")
    write_evidence(evidence, run, outcome)
    return outcome


def write_evidence(path: Path, run: Run, outcome: int | None) -> None:
    """The evidence so far, replaced whole (``outcome`` None while cases are still running)."""
    evidence = {
        "schema": 2,
        "provenance": receipts.finish(run.provenance),  # with the sha256 of the file under test
        "impl": str(run.impl),
        "lease_seconds": run.lease,
        "supplier_timeout_seconds": run.client_timeout,
        "exit_status": outcome,
        "seconds": round(time.time() - run.started, 3),
        "cases": run.cases,
        "timeline": run.timeline,
    }
    receipts.write_receipt(path, json.loads(json.dumps(evidence, default=str)))
