"""The ``ch13-check/2`` contract, stated once: ``schemas/check.json``, held by both its writer
(``make check --json``, ``lucyshop.lab.check.results``) and its reader (``make grade``,
``lucyshop.lab.grade.verdict``); its status words are the ``StrEnum``s of ``lucyshop.lab.statuses``;
and ``make check``'s rows are ``Subject``s, read by field.

A real check's JSON is validated in ``test_check_report.py`` (the stubs with the checkpoint, and
a written function that fails); these are the unit tests of each side on good and bad input.
"""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from lucyshop.lab.check.results import (
    SCHEMA,
    BrokenContract,
    CheckpointResult,
    Failure,
    Result,
    Row,
    problems,
    write_json,
)
from lucyshop.lab.check.subjects import EXERCISES, FUNCTIONS, Subject, subject, subjects
from lucyshop.lab.checkpoint.cases import Case
from lucyshop.lab.evidence.receipts import SCHEMAS
from lucyshop.lab.grade.verdict import Verdict, from_json
from lucyshop.lab.statuses import CheckpointStatus, Status, VerdictStatus

ROOT = Path(__file__).resolve().parents[2]
CHECK_ROOM = ROOT / "src" / "lucyshop" / "lab" / "check"
CONTRACT = json.loads((SCHEMAS / "check.json").read_text(encoding="utf-8"))


def a_result() -> Result:
    """A check with a failing row, a row left out and a checkpoint that failed one case."""
    result = Result(impl="learner/ch13_leases.py", exit=1, summary="15/16 functions PASSING")
    result.rows = [Row(label, "function", Status.PASSING, 3, 3) for label in FUNCTIONS]
    result.rows[9] = Row(
        "claim",
        "function",
        Status.FAILING,
        2,
        3,
        "expected 'w1', got 'w2'",
        [Failure("spec/learner/test_claim.py::test_oldest_first", "expected 'w1'", "rerun")],
    )
    result.rows += [Row(row.label, "exercise", Status.NOT_STARTED) for row in EXERCISES]
    result.rows[-2] = Row("exercise 6", "exercise", Status.LEFT_OUT, message="left out")
    cases = [Case(n, f"case {n}", n != 3, "") for n in range(7)]
    result.checkpoint = CheckpointResult(CheckpointStatus.FAILING, cases, ["a line"])
    result.feedback = ["the table"]
    return result


def document() -> dict:
    return json.loads(json.dumps(a_result().as_json()))


# ---------------------------------------------------------------- the schema and the words


def test_the_schemas_status_words_are_the_statuses_enums():
    """One list of words: the schema's enums are exactly the StrEnums' values."""
    row = CONTRACT["$defs"]["row"]["properties"]["status"]["enum"]
    checkpoint = CONTRACT["$defs"]["checkpoint"]["properties"]["status"]["enum"]
    assert sorted(row) == sorted(Status)
    assert sorted(checkpoint) == sorted(CheckpointStatus)


def test_a_status_is_its_word_in_json_and_in_print():
    assert json.dumps([Status.NOT_STARTED]) == '["NOT STARTED"]'
    assert f"{CheckpointStatus.PASSING:<8}|" == "PASSING |"
    assert VerdictStatus("CHECK ERROR") is VerdictStatus.CHECK_ERROR


def test_the_writers_document_follows_the_schema_and_reads_back_the_same(tmp_path):
    path = tmp_path / "out" / "check.json"
    write_json(a_result(), path)
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["schema"] == SCHEMA and problems(written) == []
    verdict = from_json(written, "printed")
    assert verdict.status == VerdictStatus.CHECKED
    assert verdict.rows == a_result().rows  # failures included: one Row type on both sides
    assert verdict.checkpoint == CheckpointStatus.FAILING
    assert [c.passed for c in verdict.cases] == [n != 3 for n in range(7)]


def test_the_writer_refuses_a_result_that_breaks_the_contract(tmp_path):
    result = a_result()
    result.rows[0].status = "DONE"  # a word no reader knows
    path = tmp_path / "check.json"
    with pytest.raises(BrokenContract, match=r"rows/0/status: 'DONE' is not one of"):
        write_json(result, path)
    assert not path.exists()


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        (lambda d: d.pop("rows"), "'rows' is a required property"),
        (lambda d: d["rows"][3].pop("passed"), "rows/3: 'passed' is a required property"),
        (lambda d: d["rows"][0].update(status="DONE"), "rows/0/status: 'DONE' is not one of"),
        (lambda d: d["checkpoint"].update(status="OK"), "checkpoint/status: 'OK' is not one of"),
        (lambda d: d["rows"][9]["failures"][0].pop("rerun"), "'rerun' is a required property"),
        (lambda d: d.update(schema="ch13-check/9"), "schema: 'ch13-check/2' was expected"),
        (lambda d: d.update(exit="1"), "exit: '1' is not one of"),
    ],
    ids=[
        "no-rows",
        "row-without-passed",
        "bad-status",
        "bad-checkpoint",
        "failure",
        "schema",
        "exit",
    ],
)
def test_the_reader_refuses_a_document_that_breaks_the_contract(broken, said):
    """A child's JSON that misses a field or says a word outside the contract is the grader's
    CHECK ERROR, which says how it broke: never a grade."""
    data = document()
    broken(data)
    verdict = from_json(data, "what the child printed")
    assert verdict.status == VerdictStatus.CHECK_ERROR, verdict
    assert said in verdict.error, verdict.error
    assert verdict.error.startswith("the check's result cannot be read: it breaks ch13-check/2")
    assert verdict.rows == [] and verdict.cases == []


def test_the_reader_refuses_what_is_not_a_document():
    verdict = from_json(["rows"], "printed")
    assert verdict.status == VerdictStatus.CHECK_ERROR and "JSON object" in verdict.error
    assert verdict.feedback == "printed"


def test_a_kept_verdict_reads_back_with_its_failures_and_statuses():
    verdict = from_json(document(), "")
    again = Verdict.from_dict(json.loads(json.dumps(asdict(verdict))))
    assert again == verdict
    assert isinstance(again.rows[9].failures[0], Failure)
    assert again.status is VerdictStatus.CHECKED and again.rows[0].status is Status.PASSING


def test_the_schema_is_the_one_contract_both_sides_name():
    """Writer and reader both load schemas/check.json by name; neither states the shape again."""
    assert CONTRACT["properties"]["schema"]["const"] == SCHEMA
    assert problems(copy.deepcopy(document())) == []


# ---------------------------------------------------------------- the rows, by name


def test_every_row_is_a_subject_read_by_its_fields():
    rows = subjects()
    assert all(isinstance(row, Subject) for row in rows)
    assert [row.label for row in rows][: len(FUNCTIONS)] == list(FUNCTIONS)
    claim = subject("claim")
    assert (claim.directory, claim.modules, claim.stubs) == (
        "spec/learner",
        ("test_claim",),
        ("claim",),
    )
    assert subject("exercise 7").directory == "spec/postgres"
    with pytest.raises(ValueError, match="no row 'exercise 8'"):
        subject("exercise 8")


def positional_reads(path: Path) -> list[str]:
    """Each place ``path`` unpacks a row of ``subjects()`` or ``EXERCISES`` by position (a
    tuple target in a loop over them) or indexes one (``row[0]``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def rows(node: ast.AST) -> bool:
        call = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "subjects"
        return call or (isinstance(node, ast.Name) and node.id in ("EXERCISES", "EXERCISE_ROWS"))

    for node in ast.walk(tree):
        loop = isinstance(node, ast.For | ast.comprehension) and rows(node.iter)
        if loop and isinstance(node.target, ast.Tuple):
            found.append(f"{path.name}:{node.iter.lineno}: {ast.unparse(node.target)}")
        if isinstance(node, ast.Subscript) and rows(node.value):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return sorted(found)


def test_no_caller_reads_a_row_by_position():
    lab, kit = ROOT / "src" / "lucyshop" / "lab", (ROOT / name for name in ("tests", "spec"))
    sources = [*lab.rglob("*.py"), *(path for tree in kit for path in tree.rglob("*.py"))]
    assert [line for path in sources for line in positional_reads(path)] == []


def test_the_positional_check_finds_a_tuple_read(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "labels = [label for label, *_ in subjects()]\n"
        "for label, modules, stubs in EXERCISES:\n    pass\n"
        "first = EXERCISES[0]\n"
    )
    assert positional_reads(bad) == [
        "bad.py:1: (label, *_)",
        "bad.py:2: (label, modules, stubs)",
        "bad.py:4: EXERCISES[0]",
    ]


# ---------------------------------------------------------------- the check room stays simple


def test_the_check_rooms_functions_stay_simple():
    """No function of ``lucyshop.lab.check`` over mccabe complexity 9 (``run_check`` was 24
    before the room was split; the kit-wide ruff limit is 12)."""
    ran = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "C901"]
        + ["--config", "lint.mccabe.max-complexity=9", str(CHECK_ROOM)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
