"""``make check``: every chapter-13 function NOT STARTED, FAILING or PASSING, then the checkpoint.

    python -m lucyshop.lab.report [--impl learner|solutions|PATH] [--no-checkpoint]

The learner suite (``tests/learner``) runs in a child process with the reference solutions
blocked, under a deadline. Each row is one function, in the order of ``learner/ch13_leases.py``:

- NOT STARTED: a test of it stopped at its own ``NotStarted`` (the stub is still there);
- FAILING: the first failed expectation, in one line ("needs claim() first" when what stopped
  it is another function's stub), and the command that reruns just that test;
- PASSING: every test of it passed.

Then, unless ``--no-checkpoint``, the real-process checkpoint runs against the same file and
its last lines and result are shown. Nothing of the solutions is ever printed. Exit status: 0
when every function passes (and the checkpoint, if it ran); 1 otherwise; 2 when the file cannot
be checked at all (no such file, a syntax error, an import that fails).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lucyshop.lab.loader import ENV, ROOT, SOLUTIONS, ImplementationError, impl_path

# Every chapter-13 function, in the order of learner/ch13_leases.py, with its test module.
FUNCTIONS: tuple[str, ...] = (
    "percentile",
    "false_expiry_share",
    "shortest_lease",
    "detection_delay",
    "outlive_curve",
    "fenced",
    "open_worker_shop",
    "Claim.worker_id",
    "enqueue",
    "claim",
    "assert_current",
    "observe",
    "finish",
    "recover_once",
    "reconcile",
    "cancel",
)
# The exercise book's answers (learner/exercises.py), each with its check module and its stubs.
EXERCISES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("exercise 1", "test_exercise_1", ("exercise_1_reuse_owner_label",)),
    ("exercise 2", "test_exercise_2", ("exercise_2_cancel_while_delayed",)),
    ("exercise 3", "test_exercise_3", ("observe_without_fence", "exercise_3_remove_one_fence")),
    ("exercise 4", "test_exercise_4", ("exercise_4_sessions_vs_ceiling",)),
    ("exercise 5", "test_exercise_5", ("renew", "keep_renewing", "exercise_5_renewal")),
    ("exercise 6", "test_exercise_6", ("records_message", "exercise_6_records")),
)
SUITES = ("tests/learner", "tests/exercises")
CHECKPOINT = Path("checkpoints") / "ch13_worker_recovery.py"
CHECKPOINT_RESULTS = {0: "PASSED", 1: "FAILED", 3: "NOT STARTED"}
SUITE_TIMEOUT = 900.0
TEST_TIMEOUT = (
    300  # seconds for one test; the measured exercises run real model turns in their first
)
CHECKPOINT_TIMEOUT = 600.0
LOAD_TIMEOUT = 60.0
CHECKPOINT_LINES = 12


def module_of(function: str) -> str:
    return "test_" + function.rpartition(".")[2]


def subjects() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Every row of the table: (label, test directory, test module, the stubs that are its own)."""
    rows = [(function, SUITES[0], module_of(function), (function,)) for function in FUNCTIONS]
    return rows + [(label, SUITES[1], module, stubs) for label, module, stubs in EXERCISES]


@dataclass
class Row:
    function: str
    status: str
    passed: int = 0
    total: int = 0
    message: str = ""
    rerun: str = ""


class CannotCheck(Exception):
    """The implementation cannot be checked at all: one line says why (exit 2)."""


# ---------------------------------------------------------------- running things


def start_bounded(argv: Sequence[str], *, env: dict[str, str]) -> subprocess.Popen:
    """Start ``argv`` from the kit's root in its own process group, its output captured."""
    return subprocess.Popen(
        list(argv),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )


def finish_bounded(proc: subprocess.Popen, timeout: float) -> tuple[int | None, str]:
    """Wait for ``proc`` until the deadline; (exit status or None, output).

    At the deadline, or on any interruption, the whole group (the process and anything it
    started) is killed, so a hung child of a student's code cannot outlive the check.
    """
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        output, _ = proc.communicate()
        return None, output
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise


def run_bounded(
    argv: Sequence[str], *, env: dict[str, str], timeout: float
) -> tuple[int | None, str]:
    return finish_bounded(start_bounded(argv, env=env), timeout)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def check_loadable(path: Path, env: dict[str, str]) -> None:
    """Refuse (CannotCheck) a file that does not compile or cannot be imported with the reference
    blocked."""
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError as error:
        raise CannotCheck(
            f"{shown(path)} does not compile: line {error.lineno}: {error.msg}"
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise CannotCheck(f"{shown(path)} is not Python source: {error}") from None
    code = (
        "import sys; from lucyshop.lab.loader import block_for, load_impl;"
        " block_for(sys.argv[1]); load_impl(sys.argv[1])"
    )
    status, output = run_bounded(
        [sys.executable, "-c", code, str(path)], env=env, timeout=LOAD_TIMEOUT
    )
    if status is None:
        raise CannotCheck(f"{shown(path)} did not finish importing within {LOAD_TIMEOUT:g}s")
    if status != 0:
        lines = [line for line in output.strip().splitlines() if line.strip()]
        raise CannotCheck(
            f"{shown(path)} cannot be imported: {lines[-1] if lines else f'exit {status}'}"
        )


def run_suite(
    path: Path, env: dict[str, str], timeout: float, paths: Sequence[str] = SUITES
) -> tuple[int | None, str, list[dict]]:
    with tempfile.TemporaryDirectory(prefix="lucyshop-check-") as tmp:
        outcomes = Path(tmp) / "outcomes.jsonl"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            *paths,
            "--impl",
            str(path),
            "--block-reference",
            "-q",
            "--color=no",
            "-p",
            "lucyshop.lab.collect",
            "--outcomes",
            str(outcomes),
        ]
        # The learner suite needs no third-party plugin; not loading them (nbval, hypothesis,
        # ...) saves seconds of start-up on every check. pytest-timeout stays when installed.
        if importlib.util.find_spec("pytest_timeout") is not None:
            argv += ["-p", "pytest_timeout", "--timeout", str(TEST_TIMEOUT)]
        env = env | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        status, output = run_bounded(argv, env=env, timeout=timeout)
        records = []
        if outcomes.exists():
            for line in outcomes.read_text(encoding="utf-8").splitlines():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut off by the deadline
    return status, output, records


# ---------------------------------------------------------------- the table


def shown(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def python_shown() -> str:
    executable = Path(sys.executable)
    try:
        return str(executable.relative_to(ROOT))
    except ValueError:
        return str(executable)


def rerun_command(nodeid: str, spec: str) -> str:
    return f"{python_shown()} -m pytest {shlex.quote(nodeid)} --impl {shlex.quote(spec)}"


def build_rows(records: list[dict], spec: str, *, finished: bool, timeout: float) -> list[Row]:
    results: dict[str, dict] = {}
    started: list[str] = []
    for record in records:
        if record.get("event") == "start":
            started.append(record["nodeid"])
        elif record.get("event") in ("result", "collect_error"):
            results[record["nodeid"]] = record
    hung = next((nodeid for nodeid in reversed(started) if nodeid not in results), None)

    rows = []
    for label, directory, module, stubs in subjects():
        tests = [r for r in results.values() if r.get("module") == module]
        passed = sum(r["outcome"] in ("passed", "skipped") for r in tests)
        row = Row(label, "PASSING", passed, len(tests))
        own = [r for r in tests if r.get("not_started") in stubs]
        failing = [r for r in tests if r["outcome"] == "failed"]
        if own:
            row.status = "NOT STARTED"
            section = own[0].get("section")
            row.message = f"read notebook {section}" if section else own[0]["message"]
            row.rerun = rerun_command(own[0]["nodeid"], spec)
        elif failing:
            first = failing[0]
            row.status = "FAILING"
            other = first.get("not_started")
            row.message = f"needs {other}() first" if other else first["message"]
            row.rerun = rerun_command(first["nodeid"], spec)
        elif hung is not None and Path(hung.split("::")[0]).stem == module:
            row.status = "FAILING"
            row.message = f"did not finish within {timeout:g}s (the suite was stopped in this test)"
            row.rerun = rerun_command(hung, spec)
        elif not tests:
            row.status = "FAILING"
            row.message = (
                "not reached: the suite was stopped first" if not finished else "no test ran"
            )
            row.rerun = rerun_command(f"{directory}/{module}.py", spec)
        rows.append(row)
    return rows


def print_table(rows: list[Row]) -> None:
    width = max(len(r.function) for r in rows) + 2
    print(f"  {'function':<{width}}{'status':<13}{'tests':>7}")
    for row in rows:
        tests = f"{row.passed}/{row.total}"
        line = f"  {row.function:<{width}}{row.status:<13}{tests:>7}"
        print(f"{line}   {row.message}" if row.message else line)
        if row.rerun:
            print(f"  {'':<{width}}{'':<13}{'':>7}   rerun: {row.rerun}")
    counts = {
        status: sum(r.status == status for r in rows)
        for status in ("PASSING", "FAILING", "NOT STARTED")
    }
    print()
    print(
        f"{len(rows)} rows: {counts['PASSING']} passing, {counts['FAILING']} failing,"
        f" {counts['NOT STARTED']} not started"
    )


# ---------------------------------------------------------------- the checkpoint

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


def start_checkpoint(path: Path, env: dict[str, str]) -> subprocess.Popen:
    """The checkpoint runs beside the suite: it mostly waits for real leases,
    so this is nearly free."""
    return start_bounded([sys.executable, str(CHECKPOINT), "--impl", str(path)], env=env)


def report_checkpoint(proc: subprocess.Popen, spec: str, timeout: float) -> bool:
    command = f"python {CHECKPOINT} --impl {shlex.quote(spec)}"
    print()
    print(f"checkpoint: {command}")
    status, output = finish_bounded(proc, timeout)
    lines = without_reference_source(output.rstrip().splitlines())
    for line in lines[-CHECKPOINT_LINES:]:
        print(f"  {line}")
    if status is None:
        print(f"checkpoint result: FAILED (did not finish within {timeout:g}s)")
        return False
    result = CHECKPOINT_RESULTS.get(status, "ERROR")
    print(f"checkpoint result: {result} (exit {status})")
    return status == 0


def verdict(label: str, spec: str | None = None, timeout: float = SUITE_TIMEOUT) -> str:
    """One row of the table, for a notebook's check cell: its status and what is still wrong."""
    spec = spec or os.environ.get(ENV) or "learner"
    path = impl_path(spec)
    _label, directory, module, _stubs = next(s for s in subjects() if s[0] == label)
    env = os.environ | {ENV: str(path)}
    status, _output, records = run_suite(path, env, timeout, paths=(f"{directory}/{module}.py",))
    row = next(
        r
        for r in build_rows(records, spec, finished=status is not None, timeout=timeout)
        if r.function == label
    )
    shown_row = f"{label}: {row.status} ({row.passed}/{row.total} checks)"
    return (
        shown_row
        if row.status == "PASSING"
        else f"{shown_row}\n  {row.message}\n  rerun: {row.rerun}"
    )


# ---------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.report",
        description="Check a chapter-13 file: each function's status, then the checkpoint.",
    )
    parser.add_argument(
        "--impl",
        default=None,
        help="learner, solutions or a path (default: $LEASES_IMPL, else learner)",
    )
    parser.add_argument("--no-checkpoint", action="store_true", help="show the table only")
    parser.add_argument(
        "--timeout", type=float, default=SUITE_TIMEOUT, help="seconds for the learner suite"
    )
    parser.add_argument("--checkpoint-timeout", type=float, default=CHECKPOINT_TIMEOUT)
    args = parser.parse_args(argv)

    spec = args.impl or os.environ.get(ENV) or "learner"
    try:
        path = impl_path(spec)
        if spec not in ("learner", "solutions"):
            spec = shown(path)
        env = os.environ | {ENV: str(path)}
        check_loadable(path, env)
    except (ImplementationError, CannotCheck) as error:
        print(f"make check: {error}")
        return 2

    print(f"make check: {shown(path)}, with the reference solutions blocked")
    print()
    checkpoint = None
    if not args.no_checkpoint and (ROOT / CHECKPOINT).is_file():
        checkpoint = start_checkpoint(path, env)
    try:
        ok = show_table(path, spec, env, args.timeout)
        if ok is None:
            return 2
        if args.no_checkpoint:
            return 0 if ok else 1
        if checkpoint is None:
            print()
            print(f"checkpoint: {CHECKPOINT} is not there; skipped")
            return 0 if ok else 1
        checkpoint_ok = report_checkpoint(checkpoint, spec, args.checkpoint_timeout)
        return 0 if ok and checkpoint_ok else 1
    finally:
        if checkpoint is not None and checkpoint.poll() is None:
            _kill_group(checkpoint)
            checkpoint.communicate()


def show_table(path: Path, spec: str, env: dict[str, str], timeout: float) -> bool | None:
    """Run both suites and print the table; True when every row passes,
    None when they could not run."""
    status, output, records = run_suite(path, env, timeout)
    if status is not None and status not in (0, 1):
        last = [line for line in output.strip().splitlines() if line.strip()]
        print(
            f"make check: the learner suite could not run (pytest exit {status}): "
            f"{last[-1] if last else ''}"
        )
        return None
    rows = build_rows(records, spec, finished=status is not None, timeout=timeout)
    print_table(rows)
    if status is None:
        print(f"the learner suite was stopped after {timeout:g}s")
    return status == 0 and all(row.status == "PASSING" for row in rows)


if __name__ == "__main__":
    sys.exit(main())
