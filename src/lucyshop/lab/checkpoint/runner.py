"""The checkpoint's runner: its command line, a sandbox per case, the evidence file, and the
line each case prints.

    python checkpoints/ch13_worker_recovery.py [--impl learner|solutions|PATH]
                                               [--evidence FILE] [--lease SECONDS] [--case N]
                                               [--keep DIR]

The checkpoint file holds only its cases and ends with ``main(globals())``: this module finds
one function there for each case of ``lucyshop.lab.checkpoint.cases`` (named after it), runs
the cases chosen in order, each with a sandbox of its own whose only writable place is the
case's directory, and writes what it observed (``Run``) and nothing else to the evidence.
Whatever the student's code raises fails that case by name; the verdict that counts is the
judge's, read from the files each case kept.

Exit status: 0 every case passed, 1 a case failed, 3 the implementation is still a stub.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import CASES, CaseId
from lucyshop.lab.checkpoint.checks import CheckFailed, refused_at
from lucyshop.lab.checkpoint.judge import EXIT, kept_directory, overall, said
from lucyshop.lab.evidence import receipts
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ROOT, ReferenceBlocked, add_impl_option, impl_path
from lucyshop.lab.sandbox import Sandbox, describe
from lucyshop.lab.statuses import CaseResult, Mark, result_line

CASE_SECONDS = 120.0  # what one case's calls into the sandbox may take in all
CaseFunction = Callable[
    ["Run", Any, Path], dict[str, Any]
]  # (run, the sandboxed leases, directory)


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


def case_functions(namespace: Mapping[str, Any]) -> dict[CaseId, CaseFunction]:
    """Each case's function in the checkpoint's ``namespace``, in the order of ``CASES``."""
    missing = [case.function for case in CASES if not callable(namespace.get(case.function))]
    if missing:
        raise LookupError(f"the checkpoint defines no function for {', '.join(missing)}")
    return {case: namespace[case.function] for case in CASES}


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
    number, name = case
    again = f"      rerun: {rerun} --case {number}"
    try:
        facts = function(run, leases, directory)
    except NotStarted as stub:
        record = {"result": CaseResult.NOT_STARTED, "function": stub.function, "message": str(stub)}
        return record, result_line(Mark.NOT_STARTED, f"{number} {name}", str(stub))
    except ReferenceBlocked as blocked:
        record = {"result": CaseResult.FAIL, "message": str(blocked)}
        return record, result_line(Mark.FAIL, f"{number} {name}", str(blocked))
    except CheckFailed as failed:
        record = {
            "result": CaseResult.FAIL,
            "check": failed.check,
            "expected": repr(failed.expected),
            "seen": repr(failed.seen),
            "message": str(failed),
        }
        return record, result_line(Mark.FAIL, f"{number} {name}", f"{failed}\n{again}")
    # A student's code may raise anything, SystemExit included: fail this case and say where.
    except BaseException as error:
        if INTERRUPTED:
            raise  # a real Ctrl-C stops the checkpoint; a KeyboardInterrupt raised by code fails
        kind = type(error).__name__
        where = traceback.extract_tb(error.__traceback__)[-1]
        stopped = " (it tried to stop the checkpoint)" if not isinstance(error, Exception) else ""
        message = f"{kind}{stopped}: {error}"
        record = {"result": CaseResult.FAIL, "error": message, "message": message}
        at = f"\n      at {where.filename}:{where.lineno}\n{again}"
        return record, result_line(Mark.FAIL, f"{number} {name}", message + at)
    passed = result_line(Mark.PASS, f"{number} {name}", summary(facts))
    return {"result": CaseResult.PASS} | facts, passed


def main(namespace: Mapping[str, Any], argv: list[str] | None = None) -> int:
    """The checkpoint whose case functions are in ``namespace`` (its file's ``globals()``)."""
    functions = case_functions(namespace)
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
        choices=[case.number for case in CASES],
        help="run only this case (again for more): "
        + ", ".join(f"{case.number} {case.name}" for case in CASES),
    )
    parser.add_argument(
        "--keep", type=Path, help="keep each case's shop and ledger under this directory"
    )
    args = parser.parse_args(argv)
    if not math.isfinite(args.lease) or not 0.5 <= args.lease <= 60:
        parser.error("--lease must be between 0.5 and 60 seconds")
    impl = impl_path(args.impl)
    signal.signal(signal.SIGINT, _interrupted)
    run = Run(impl=impl, lease=args.lease, client_timeout=round(args.lease * 0.4, 3))
    command = sys.argv if argv is None else [str(here), *argv]
    run.provenance = receipts.provenance(command=command, code=[impl])
    root = args.keep or Path(tempfile.mkdtemp(prefix="ch13-checkpoint-"))
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="ch13-checkpoint-sandbox-"))
    try:
        return run_cases(run, args, root, workdir, functions, here)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def run_cases(
    run: Run,
    args: argparse.Namespace,
    root: Path,
    workdir: Path,
    functions: dict[CaseId, CaseFunction],
    here: Path,
) -> int:
    """Every case chosen, each with a sandbox of its own whose only writable place is the
    case's directory; the exit status."""
    print(
        f"checkpoint 13 on {run.impl} (lease {run.lease:g}s,"
        f" supplier timeout {run.client_timeout:g}s; {describe()})"
    )
    python = os.path.relpath(sys.executable) if sys.prefix != sys.base_prefix else "python"
    rerun = f"{python} {here.relative_to(ROOT)} --impl {shlex.quote(str(args.impl))}"
    results: dict[str, str] = {}
    for case in [c for c in CASES if not args.case or c.number in args.case]:
        number, name = case
        run.cases[name] = {"case": number, "result": CaseResult.STARTED}
        if args.evidence:  # a case that ends the process is named by this record
            write_evidence(args.evidence, run, None)
        directory = root / f"case{number}"
        for fresh in (directory, kept_directory(directory)):
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir(parents=True)
        box = Sandbox(
            run.impl,
            scratch=[directory],
            workdir=workdir / f"case{number}",
            shown=receipts.shown(run.impl),
        )
        with box:
            box.share(directory)
            try:
                leases = box.load(seconds=CASE_SECONDS)
            except ReferenceBlocked as blocked:
                print(result_line(Mark.FAIL, "reference blocked", str(blocked)))
                return 1
            record, line = run_case(run, leases, case, functions[case], directory, rerun)
        results[name] = record["result"]
        run.cases[name] = {"case": number} | record
        print(line)
        if args.evidence:
            write_evidence(args.evidence, run, None)
    status = overall(results.values())
    outcome = EXIT[status]
    print(
        f"{said(status)} ({sum(v == CaseResult.PASS for v in results.values())}/{len(results)}"
        f" cases, {time.time() - run.started:.1f}s)"
    )
    if args.evidence:
        write_evidence(args.evidence, run, outcome)
        print(f"evidence: {args.evidence}")
    return outcome


def write_evidence(path: Path, run: Run, outcome: int | None) -> None:
    """The evidence so far, replaced whole (``outcome`` None while cases are still running)."""
    evidence = {
        "schema": 2,
        "provenance": receipts.finish(run.provenance),  # with the sha256 of the checked file
        "impl": str(run.impl),
        "lease_seconds": run.lease,
        "supplier_timeout_seconds": run.client_timeout,
        "exit_status": outcome,
        "seconds": round(time.time() - run.started, 3),
        "cases": run.cases,
        "timeline": run.timeline,
    }
    receipts.write_receipt(path, json.loads(json.dumps(evidence, default=str)))
