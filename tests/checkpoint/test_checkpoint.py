"""The checkpoint itself: it passes the reference (run once, as ``make demo`` runs it), says
NOT STARTED of the stubs, fails every mutant, leaves nothing behind; its case list is stated
once, in ``lucyshop.lab.checkpoint.cases``, and its file defines exactly those cases."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mutants import MUTANTS

from lucyshop.lab.checkpoint import cases, judge, runner
from lucyshop.lab.checkpoint.cases import (
    ARITHMETIC,
    BEYOND,
    CANCEL,
    CASES,
    FENCE,
    HELD,
    KILLED,
    LIVE_STALE,
    ON_POSTGRES,
    PAUSED,
    POST_COMMIT,
)
from lucyshop.lab.checkpoint.demo import EVIDENCE
from lucyshop.lab.checkpoint.expectations import ExpectationFailed
from lucyshop.lab.checkpoint.launch import PG_SCRIPT, SCRIPT, checkpoint_command
from lucyshop.lab.evidence import receipts
from lucyshop.lab.evidence.receipts import validate
from lucyshop.lab.services.processes import processes_mentioning
from lucyshop.lab.statuses import CaseResult, CheckpointStatus
from lucyshop.status.signals import pid_alive

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / SCRIPT
PG_CHECKPOINT = ROOT / PG_SCRIPT
CASES_MODULE = ROOT / "src" / "lucyshop" / "lab" / "checkpoint" / "cases.py"


def run_checkpoint(
    *args: str, tmp: Path, timeout: float = 120, command: list[str] | None = None
) -> subprocess.CompletedProcess:
    """The checkpoint with ``args``, after ``command`` (by default the script alone)."""
    env = os.environ | {"TMPDIR": str(tmp)}
    return subprocess.run(
        [*(command or [sys.executable, str(CHECKPOINT)]), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def demo_run() -> subprocess.CompletedProcess:
    """``make demo``: the checkpoint against the reference (every case, ``--keep``, its evidence
    written to ``lucyshop.lab.checkpoint.demo.EVIDENCE``), then the recovered shop's
    status report."""
    return subprocess.run(
        [sys.executable, "-m", "lucyshop.lab.checkpoint.demo"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def reference_run(demo_run) -> tuple[subprocess.CompletedProcess, dict]:
    """The demo's checkpoint run and the evidence it recorded: one run of the reference serves
    the demo's test and every test that reads the reference's cases."""
    return demo_run, json.loads(EVIDENCE.read_text())


def test_reference_passes_every_case(reference_run):
    """Each case's line names it; the kit's own cases say they go beyond the book."""
    result, evidence = reference_run
    assert result.returncode == 0, result.stdout + result.stderr
    assert [
        line.split(": ")[0] for line in result.stdout.splitlines() if line[:4] in ("PASS", "FAIL")
    ] == [f"PASSING  {case.title}" for case in CASES]
    assert [case.title for case in CASES if not case.in_book] == [
        f"{case.number} {case.name} (beyond the book)" for case in (PAUSED, POST_COMMIT, CANCEL)
    ]
    assert evidence["exit_status"] == 0
    assert {case["result"] for case in evidence["cases"].values()} == {"PASSING"}


def test_killed_holder_evidence_is_what_was_observed(reference_run):
    _, evidence = reference_run
    killed = evidence["cases"][KILLED.name]
    ready = next(
        e for e in evidence["timeline"] if e["case"] == KILLED.tag and e["event"] == "holder ready"
    )
    assert killed["exit_status"] == -signal.SIGKILL
    assert killed["child_pid"] == ready["pid"] and killed["child_pid"] != os.getpid()
    assert not pid_alive(killed["child_pid"])  # the host's pid of the killed holder
    assert killed["generations"] == [1, 2]
    assert (killed["work_state"], killed["outcome"]) == ("finished", "DONE")
    assert killed["ledger_count"] == 1 and killed["ledger_operations"] == [ready["operation"]]
    assert killed["reserved_cents"] == [2700, 0] and killed["spent_cents"] == [0, 2700]
    assert killed["transcript_rows"] == 0 and killed["model_calls"] == 0
    assert killed["second_recovery"] == "IDLE"
    # The wait was real: the lease ran out on the wall clock, not by rewriting time.
    assert killed["waited_seconds"] > 0
    expired = next(
        e for e in evidence["timeline"] if e["case"] == KILLED.tag and e["event"] == "lease expired"
    )
    replaced = next(
        e
        for e in evidence["timeline"]
        if e["case"] == KILLED.tag and e["event"] == "replacement finished"
    )
    assert ready["t"] < expired["t"] <= replaced["t"]
    assert expired["t"] - ready["t"] >= evidence["lease_seconds"] * 0.5


def test_stale_holders_report_their_own_refusals(reference_run):
    _, evidence = reference_run
    for name in (LIVE_STALE.name, PAUSED.name):
        case = evidence["cases"][name]
        assert set(case["stale_child_reported"]) == {"transcript", "completion", "supplier"}
        for boundary, report in case["stale_child_reported"].items():
            assert report.startswith("PermissionError"), (name, boundary, report)
        assert case["ledger_count"] == 1
    assert "superseded by 2" in evidence["cases"][PAUSED.name]["stale_child_reported"]["transcript"]
    assert "finished" in evidence["cases"][LIVE_STALE.name]["stale_child_reported"]["transcript"]


def test_the_fence_case_records_which_comparison_refused_each_write(reference_run):
    """Generation 1 was claimed in the past, so its lease ran out on the wall clock: its own
    write is refused by the expiry; once the same owner holds generation 2, live, its writes
    are refused by the generation (the reference's refusals name the comparison)."""
    _, evidence = reference_run
    fence = evidence["cases"][FENCE.name]
    assert fence["generations"] == [1, 2] and fence["next_turn_generation"] == 1
    assert fence["expired_refused"] == {
        "transcript": "PermissionError: the lease of lucy-worker#1 on work 1 has expired"
    }
    superseded = "PermissionError: generation 1 of work 1 is superseded by 2"
    assert fence["refused"] == {"transcript": superseded, "completion": superseded}
    assert fence["transcript_generations"] == [2]


def test_post_commit_crash_is_settled_by_lookup(reference_run):
    _, evidence = reference_run
    case = evidence["cases"][POST_COMMIT.name]
    assert case["order_after_crash"] in ("SENDING", "UNKNOWN")
    assert case["exit_status"] == -signal.SIGKILL
    assert case["ledger_count"] == 1 and case["outcome"] == "DONE"


def test_evidence_records_provenance_and_a_timeline(reference_run):
    _, evidence = reference_run
    assert evidence["impl"].endswith("solutions/ch13_leases.py")
    assert evidence["lease_seconds"] > evidence["supplier_timeout_seconds"] > 0
    provenance = evidence["provenance"]
    assert provenance["started_utc"] and provenance["python"] and provenance["sqlite"]
    checked = receipts.file_record(evidence["impl"])
    assert provenance["code"] == {checked["path"]: checked["sha256"]}  # exactly the file it ran
    times = [event["t"] for event in evidence["timeline"]]
    assert times == sorted(times) and len(times) >= 20
    assert validate(evidence, "checkpoint") == []


def test_untouched_stubs_exit_3_naming_each_first_stub_once(tmp_path):
    """Part A's case stops at percentile(), every later case at claim(): two lines, not seven
    (the six cases that stop at the same stub share one)."""
    result = run_checkpoint("--impl", "learner", tmp=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if line.startswith("NOT STARTED")]
    arithmetic, rest = said
    assert arithmetic.startswith(
        f"NOT STARTED  {ARITHMETIC.title}: percentile() is not started: read notebook 13a §"
    )
    assert rest.startswith(f"NOT STARTED  cases {FENCE.number}-{CASES[-1].number}: claim() is")
    assert "13b §" in rest and "Traceback" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"checkpoint NOT STARTED (0/{len(CASES)}")


def test_a_file_that_does_not_import_fails_in_one_line(tmp_path):
    broken = tmp_path / "ch13_leases.py"
    broken.write_text("from lucyshop.store import no_such_name\n")
    result = run_checkpoint("--impl", str(broken), tmp=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines()[1].startswith(
        f"FAILING  {ARITHMETIC.title}: no sandbox loaded {broken}: ImportError: cannot import name"
        " 'no_such_name' from 'lucyshop.store'"
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"checkpoint FAILING (0/{len(CASES)}")


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.checkpoint_case], ids=lambda m: m.name)
def test_checkpoint_catches_mutant(mutant, tmp_path):
    result = run_checkpoint(
        "--impl",
        str(mutant.write(tmp_path)),
        "--case",
        str(mutant.checkpoint_case.number),
        tmp=tmp_path,
    )
    assert result.returncode == 1, result.stdout
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    title = mutant.checkpoint_case.title
    assert any(line.startswith(f"FAILING  {title}: ") for line in failed), failed
    python = os.path.relpath(sys.executable, ROOT)  # the venv's, so it works unactivated
    assert f"rerun: {python} checkpoints/ch13_worker_recovery.py" in result.stdout


def test_the_judge_finds_a_write_after_the_rivals_takeover_in_the_kept_copies(tmp_path):
    """The fence case keeps the copies its rival took the work over in; the judge reads them
    again, so evidence that says the case passed does not pass a writer whose holder check
    is a transaction of its own."""
    mutant = next(m for m in MUTANTS if m.name == "finish_check_in_its_own_transaction")
    keep, evidence = tmp_path / "keep", tmp_path / "evidence.json"
    args = ("--impl", str(mutant.write(tmp_path)), "--case", str(FENCE.number))
    result = run_checkpoint(*args, "--keep", str(keep), "--evidence", str(evidence), tmp=tmp_path)
    assert result.returncode == 1, result.stdout
    recorded = json.loads(evidence.read_text())
    recorded["cases"][FENCE.name] = {"case": FENCE.number, "result": "PASSING"}  # forged
    evidence.write_text(json.dumps(recorded))
    _status, found = judge.judge(evidence, keep)
    fence = found[FENCE.number]
    assert not fence.passed and "finish() beside a rival" in fence.message, fence
    assert "after the holder check and before finish's write" in fence.message, fence


def test_a_case_has_the_time_limit_its_launcher_gives_it(tmp_path):
    """``make check`` stops a case past its limit and hands the checkpoint the same limit,
    which bounds the case's calls into its sandbox: a call that hangs fails the case at that
    limit, naming the call, before the watcher's kill."""
    hangs = tmp_path / "ch13_leases.py"
    source = (ROOT / "solutions" / "ch13_leases.py").read_text()
    hangs.write_text(source + "\n\ndef percentile(values, p):\n    while True:\n        pass\n")
    started = time.monotonic()
    result = run_checkpoint(
        "--case",
        str(ARITHMETIC.number),
        tmp=tmp_path,
        command=checkpoint_command(hangs, case_timeout=3),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"FAILING  {ARITHMETIC.title}: CallTimedOut: timed out after 3 s in percentile()" in (
        result.stdout
    ), result.stdout
    assert time.monotonic() - started < 60


def test_a_lease_must_fit_in_a_case():
    """A lease as long as a case could never be outlived inside it: refused before any case."""
    namespace = {case.function: lambda *args: {} for case in CASES}
    namespace |= {"__file__": str(CHECKPOINT), "__doc__": "a checkpoint"}
    with pytest.raises(SystemExit) as refused:
        runner.main(namespace, argv=["--lease", "5", "--case-timeout", "5"])
    assert refused.value.code == 2


def test_a_learner_file_that_imports_the_reference_is_stopped(tmp_path):
    cheat = tmp_path / "cheat.py"
    cheat.write_text("from solutions.ch13_leases import *  # noqa\n")
    result = run_checkpoint("--impl", str(cheat), tmp=tmp_path)
    assert result.returncode == 1
    assert "reference blocked" in result.stdout


def test_a_child_that_reads_the_reference_is_stopped(tmp_path):
    """The cheat only happens in worker children: the reference is not in their sandbox."""
    source = (ROOT / "solutions" / "ch13_leases.py").read_text()
    first_line_of_claim = "    now = time.time() if now is None else now\n"  # then assert_current's
    cheat = tmp_path / "child_cheat.py"
    cheat.write_text(
        source.replace(
            first_line_of_claim,
            "    if '/inside/holder.py' in ' '.join(__import__('sys').argv):\n"
            "        __import__('runpy').run_path("
            f"{str(ROOT / 'solutions' / 'ch13_leases.py')!r})\n" + first_line_of_claim,
            1,
        )
    )
    assert cheat.read_text() != source
    result = run_checkpoint("--impl", str(cheat), "--case", str(KILLED.number), tmp=tmp_path)
    assert result.returncode == 1
    assert f"FAILING  {KILLED.number} {KILLED.name}" in result.stdout, result.stdout
    assert "No such file or directory: '" + str(ROOT / "solutions") in result.stdout, result.stdout


def test_no_process_survives_a_run_or_an_interrupt(tmp_path):
    marker = str(tmp_path)
    result = run_checkpoint("--impl", "solutions", "--case", str(KILLED.number), tmp=tmp_path)
    assert result.returncode == 0, result.stdout
    assert processes_mentioning(marker) == []
    env = os.environ | {"TMPDIR": marker}
    proc = subprocess.Popen(
        [*checkpoint_command("solutions"), "--case", str(LIVE_STALE.number)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(processes_mentioning(marker)) < 2:
        time.sleep(0.05)  # until the supplier and the worker child are both up
    assert len(processes_mentioning(marker)) >= 2
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while processes_mentioning(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(marker) == []


def test_the_demo_shows_the_recovery_and_the_shop_before_and_after(demo_run):
    result = demo_run
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    out = result.stdout
    assert (
        f"PASSING  {KILLED.number} {KILLED.name}: exit -9, generation 1->2, DONE, ledger 1 order,"
        " model calls 0" in out
    )
    assert f"checkpoint passed ({len(CASES)}/{len(CASES)} cases" in out
    assert "evidence (every figure observed in this run): .scratch/checkpoint-evidence.json" in out
    before, after = out.split("The same shop after the replacement recovered it")
    assert (
        "running 1" in before.split("shop-before-recovery.db")[-1]
        and "reserved 2700, spent 0" in before
    )
    # The killed worker, by its pid on this machine (not its pid in the sandbox), is gone.
    killed = json.loads(EVIDENCE.read_text())["cases"][KILLED.name]["child_pid"]
    assert "workers   0 alive, 1 gone" in before
    assert re.search(rf"lucy-worker +pid {killed} +GONE +holds work 1\n", before), before
    assert (
        "finished 1 (DONE 1)" in after
        and "lucy-worker#2" in after
        and "reserved 0, spent 2700" in after
    )


def test_a_failed_check_names_each_field_that_differs():
    """``expected (1, 2) saw (2, 1)`` said nothing of what 1 and 2 were: a failed comparison
    of named fields names the ones that differ, and other values are shown whole."""
    failed = ExpectationFailed(
        "replacement takes over", {"work_id": 1, "generation": 2}, {"work_id": 1, "generation": 1}
    )
    assert str(failed) == "replacement takes over: generation expected 2, saw 1"
    whole = ExpectationFailed("supplier ledger", ["op-1"], [])
    assert str(whole) == "supplier ledger: expected ['op-1'], saw []"


# ------------------------------------------------------------------ the case list, stated once

NAMES = {case.name for case in CASES}
ONLY_CASE_NAMES = {name for name in NAMES if " " in name}  # names that mean nothing but a case
# A case's tag and its holder's mode: plain words ("live", "cancel") outside the checkpoint.
WORDS = ({case.tag for case in CASES} | {str(case.holder) for case in HELD}) - NAMES
CONSTANTS = {name for name, value in vars(cases).items() if value in CASES}  # KILLED, ...
SCANNED = sorted(
    {*ROOT.glob("src/**/*.py"), *ROOT.glob("checkpoints/*.py"), *ROOT.glob("tests/**/*.py")}
    - {CASES_MODULE}
)
# Where a case's tag or mode, even alone, is a second copy: the checkpoints and their machinery.
CHECKPOINT_CODE = {*ROOT.glob("checkpoints/*.py"), *CASES_MODULE.parent.glob("*.py")}


def _names_a_case(node: ast.AST) -> bool:
    """``KILLED``, ``KILLED.name`` (or ``.tag``, ``.function``) or ``"killed holder"``."""
    if isinstance(node, ast.Attribute) and node.attr in ("name", "tag", "function"):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in CONSTANTS
    return isinstance(node, ast.Constant) and node.value in NAMES


def _numbers_a_case(node: ast.AST) -> bool:
    """A tuple, list or dict that pairs a number with a case: the case numbered again."""
    if isinstance(node, ast.Dict):
        pairs = [(k, v) for k, v in zip(node.keys, node.values, strict=True) if k is not None]
        return any(_is_int(a) and _names_a_case(b) for k, v in pairs for a, b in ((k, v), (v, k)))
    if isinstance(node, ast.List | ast.Tuple):
        return any(map(_is_int, node.elts)) and any(map(_names_a_case, node.elts))
    return False


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _strings(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of ``tree``, docstrings and other bare strings left out."""
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare
    ]


def restated(source: str, checkpoint_code: bool = False) -> list[str]:
    """Where ``source`` states the checkpoint's case list again: a case's name that can mean
    nothing else (``"killed holder"``); two or more case names, or two or more tags or holder
    modes, in one list, tuple, set or dict (nested or not); a number paired with a case (the
    case numbered again); a count of cases bound to a name (``CHECKPOINT_CASES = 7``); and, in
    ``checkpoint_code``, a case's tag or holder mode written out at all (``Shop(...,
    "killed")``). One case read by its constant (``KILLED.name``, ``KILLED.tag``) or a plain
    word elsewhere (``"cancel"``, a function) is not."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in ONLY_CASE_NAMES:
            found.append(f"line {node.lineno}: the case name {node.value!r}")
        elif isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            inside = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)]
            named = [value for value in inside if isinstance(value, str) and value in NAMES]
            if len(named) > 1:
                found.append(f"line {node.lineno}: the case names {named}")
            words = sorted({value for value in inside if isinstance(value, str)} & WORDS)
            if len(words) > 1:
                found.append(f"line {node.lineno}: the cases' tags or holder modes {words}")
            if _numbers_a_case(node):
                found.append(f"line {node.lineno}: a case numbered here")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = [t.id for t in targets if isinstance(t, ast.Name) and "CASES" in t.id.upper()]
            value = node.value
            if named and isinstance(value, ast.Constant) and type(value.value) is int:
                found.append(f"line {node.lineno}: {named[0]}, a count of cases ({value.value})")
    if checkpoint_code:
        found += [
            f"line {n.lineno}: the tag or holder mode {n.value!r}"
            for n in _strings(tree)
            if n.value in WORDS
        ]
    return found


def test_the_case_list_is_stated_once():
    """Only ``lucyshop.lab.checkpoint.cases`` states the cases, their numbers, tags and holder
    modes: both checkpoints, the runner, the judge, the rubric, the demo, the lesson, these
    tests, the mutants and the hostile forgery all read them from there."""
    found = {
        str(path.relative_to(ROOT)): hits
        for path in SCANNED
        if (hits := restated(path.read_text(encoding="utf-8"), path in CHECKPOINT_CODE))
    }
    assert found == {}


def test_the_scan_finds_the_list_stated_again():
    """Each way the list was stated before it had one home is found; reading it is not."""
    planted = {
        "the checkpoint's table": 'CASES = {2: ("killed holder", case_killed)}',
        "the judge's": 'CASES = ((0, "arithmetic"), (1, "fence"))',
        "the tests'": 'CASES = {"arithmetic": 0, "cancel": 6}',
        "the rubric's count": "CHECKPOINT_CASES = 7",
        "a mutant's case": 'Mutant("x", "old", "new", checkpoint_case="paused holder")',
        "an annotated count": "N_CASES: int = 7",
        "the pg checkpoint's numbers": "CASES = ((1, KILLED.name, KILLED.tag), (2, LIVE_STALE))",
        "a number for one case": "FIRST = {1: KILLED}",
        "the holder's modes": 'MODES = ("killed", "live", "paused", "sending", "cancel")',
        "the lesson's lanes": 'LANED = {"killed": KILLED, "post-commit": POST_COMMIT}',
    }
    for what, source in planted.items():
        assert restated(source), what
    passed_twice = 'with Shop(run, leases, directory, "killed") as shop:\n    shop.start("killed")'
    assert len(restated(passed_twice, checkpoint_code=True)) == 2
    assert restated(passed_twice) == []  # a plain word, outside the checkpoint
    read = "KILLED.name\nCHECKPOINT_CASES = len(CASES)\nLANED = {c.tag: c for c in HELD}\n"
    read += 'Shop(run, leases, directory, KILLED)\nrun.event(FENCE.tag, "seen", n=1)\n'
    read += '"""A killed holder; live, then cancel."""\n'
    assert restated(read + 'case = evidence["cases"]["arithmetic"]\n', checkpoint_code=True) == []


def test_the_checkpoint_defines_the_listed_cases_in_order():
    """One function per case, named after it, in the list's order, each saying what it proves;
    the judge rules on the same cases."""
    tree = ast.parse(CHECKPOINT.read_text(encoding="utf-8"))
    defined = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name[0] != "_"
    ]
    assert [node.name for node in defined] == [case.function for case in CASES]
    assert [node.name for node in defined if not ast.get_docstring(node)] == []
    said_beyond = [n.name for n in defined if BEYOND in ast.get_docstring(n).lower()]
    assert said_beyond == [case.function for case in CASES if not case.in_book]
    assert list(judge.RULES) == [case.name for case in CASES]
    assert [case.number for case in CASES] == list(range(len(CASES)))


def test_the_pg_checkpoint_defines_its_listed_cases_in_order():
    """Exercise 7's checkpoint: one function for each case ``ON_POSTGRES`` lists (numbered as
    the list numbers them), and the judge rules on those cases on PostgreSQL."""
    tree = ast.parse(PG_CHECKPOINT.read_text(encoding="utf-8"))
    defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert defined == [case.function for case in ON_POSTGRES]
    assert list(judge.POSTGRES_RULES) == [case.name for case in ON_POSTGRES]


def test_the_rubric_counts_the_listed_cases():
    from lucyshop.lab.grade.rubric import CHECKPOINT_CASES  # the grading room, only here

    assert CHECKPOINT_CASES == len(CASES)


def test_the_runner_refuses_a_checkpoint_without_a_case():
    namespace = {case.function: lambda *args: {} for case in CASES}
    del namespace[KILLED.function]
    with pytest.raises(LookupError, match=f"defines no function for {KILLED.function}$"):
        runner.case_functions(namespace)


@pytest.mark.parametrize(
    ("results", "status"),
    [
        ([CaseResult.PASSING, CaseResult.PASSING], CheckpointStatus.PASSING),
        ([CaseResult.PASSING, CaseResult.NOT_STARTED], CheckpointStatus.NOT_STARTED),
        ([CaseResult.NOT_STARTED, CaseResult.FAILING], CheckpointStatus.FAILING),
        ([CaseResult.PASSING, CaseResult.STARTED], CheckpointStatus.FAILING),  # ended inside a case
        (["PASSING", "bogus"], CheckpointStatus.FAILING),  # a word it does not know is no pass
    ],
)
def test_one_rule_turns_case_results_into_the_checkpoint_status(results, status):
    """The child's own summary and the judge's verdict use the same rule (judge.overall), and
    the same exit statuses (judge.EXIT): 0 PASSING, 1 FAILING, 3 NOT STARTED."""
    assert judge.overall(results) == status
    assert judge.EXIT[status] == {"PASSING": 0, "FAILING": 1, "NOT STARTED": 3}[status]
    assert judge.said(status) == (
        "checkpoint passed" if status == "PASSING" else f"checkpoint {status}"
    )


FUTURE = "from __future__ import annotations"


def half_done(directory: Path, *stubs: str) -> Path:
    """The reference with ``stubs`` put back as the learner's stubs: work in progress."""
    reference = (ROOT / "solutions" / "ch13_leases.py").read_text(encoding="utf-8")
    learner = (ROOT / "learner" / "ch13_leases.py").read_text(encoding="utf-8")

    def spans(text: str) -> dict[str, tuple[int, int]]:
        tree = ast.parse(text)
        return {
            node.name: (node.lineno - 1, node.end_lineno or node.lineno)
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
        }

    lines, given = reference.splitlines(keepends=True), learner.splitlines(keepends=True)
    theirs, ours = spans(reference), spans(learner)
    for name in sorted(stubs, key=lambda name: theirs[name][0], reverse=True):
        start, end = theirs[name]
        lines[start:end] = given[slice(*ours[name])]
    text = "".join(lines).replace(FUTURE, f"{FUTURE}\nfrom lucyshop.lab import NotStarted", 1)
    path = directory / "ch13_leases.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_whose_fence_is_still_a_stub_is_not_started_in_every_case_that_reaches_it(
    tmp_path,
):
    """A holder that held the work and only then met a stub (observe, after it was released)
    says so where the checkpoint waits for it: NOT STARTED naming observe, never a holder
    that "exited before writing" (FAILING)."""
    path = half_done(tmp_path, "observe")
    cases = [f"--case={case.number}" for case in (LIVE_STALE, PAUSED)]
    result = run_checkpoint("--impl", str(path), *cases, tmp=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    said = [line for line in result.stdout.splitlines() if line.startswith("NOT STARTED")]
    assert len(said) == 1 and "observe() is not started: read notebook 13b §" in said[0], said
    assert f"cases {LIVE_STALE.number}-{PAUSED.number}" in said[0], said
    assert "exited with status" not in result.stdout + result.stderr
