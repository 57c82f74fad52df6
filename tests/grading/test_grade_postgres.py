"""Exercise 7 graded by a real ``python -m lucyshop.lab.grade`` (what ``make grade`` runs): a
hand-in's ``ch13_postgres.py`` is checked on a real PostgreSQL server, in the sandbox, and its
row is in grades.csv, the feedback and Gradescope's results, whose lines still add up exactly.

Three students hand in the chapter's stubs (their function rows run nothing) and no
``exercises.py``: one the reference's ``ch13_postgres.py``, one a copy whose ``observe()``
writes nothing, one no ``ch13_postgres.py`` at all.
"""

from __future__ import annotations

import ast
import csv
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import jsonschema
import pytest
from grading_class import STUBS

from lucyshop.lab.grade import rubric
from lucyshop.lab.grade.gradescope import results
from lucyshop.lab.loader import ROOT
from lucyshop.lab.services import postgres

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(postgres.missing() is not None, reason=f"{postgres.missing()}"),
]

REFERENCE = ROOT / "solutions" / "ch13_postgres.py"


def without(function: str) -> str:
    """The reference's ch13_postgres.py with ``function`` returning None at once."""
    source = REFERENCE.read_text(encoding="utf-8")
    node = next(
        n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function
    )
    lines = source.splitlines(keepends=True)
    body = node.body[1].lineno - 1  # after the docstring
    return "".join([*lines[:body], "    return None\n", *lines[node.end_lineno :]])


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, dict[str, dict[str, str]]]:
    hand_ins = tmp_path_factory.mktemp("class")
    for name, postgres_file in (
        ("ana", REFERENCE.read_text(encoding="utf-8")),
        ("bo", without("observe")),
        ("cy", None),
    ):
        folder = hand_ins / name
        folder.mkdir()
        (folder / "ch13_leases.py").write_text(STUBS.read_text(encoding="utf-8"), "utf-8")
        if postgres_file is not None:
            (folder / "ch13_postgres.py").write_text(postgres_file, encoding="utf-8")
    out = tmp_path_factory.mktemp("grades")
    done = subprocess.run(
        [sys.executable, "-m", "lucyshop.lab.grade", str(hand_ins), "--out", str(out)]
        + ["--jobs", "2", "--no-checkpoint", "--no-progress"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=800,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    return out, rows


def results_of(out: Path, name: str) -> dict:
    return json.loads((out / "gradescope" / name / "results.json").read_text("utf-8"))


def test_exercise_7_is_a_row_of_the_gradebook_and_earns_its_share(graded):
    _out, rows = graded
    loaded = rubric.load()
    share = rubric.shares(loaded.exercises.points, [1] * 6 + [2])[-1] / 100  # 2 of 8 weights
    ana, bo, cy = rows["ana"], rows["bo"], rows["cy"]
    assert (ana["exercise 7"], ana["exercise_7_passed"]) == ("PASSING", ana["exercise_7_total"])
    total = int(ana["exercise_7_total"])
    assert total > 30, total  # every test of the four student modules
    assert float(ana["score"]) == share  # the stubs earn nothing else, the checkpoint did not run
    passed = int(bo["exercise_7_passed"])
    assert bo["exercise 7"] == "FAILING" and 0 < passed < total == int(bo["exercise_7_total"])
    assert 0 < float(bo["score"]) < share  # partial credit: tests passed over tests run
    assert (cy["exercise 7"], cy["exercise_7_total"], float(cy["score"])) == (
        "NOT SUBMITTED",
        "0",
        0,
    )


def test_gradescope_has_the_row_and_every_score_adds_up_exactly(graded):
    out, rows = graded
    loaded = rubric.load()
    schema = json.loads(results.SCHEMA.read_text(encoding="utf-8"))
    for name in ("ana", "bo", "cy"):
        document = results_of(out, name)
        jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
        tests = document["tests"]
        assert sum(Decimal(str(t["max_score"])) for t in tests) == Decimal(str(loaded.total))
        assert sum(Decimal(str(t["score"])) for t in tests) == Decimal(str(document["score"]))
        assert document["score"] == pytest.approx(float(rows[name]["score"]))
    ana = {t["name"]: t for t in results_of(out, "ana")["tests"]}
    row = next(t for name, t in ana.items() if name.startswith("exercise 7 ("))
    assert row["status"] == "passed" and row["score"] == row["max_score"] > 0
    assert ana["exercises 1-6: NOT SUBMITTED"]["score"] == 0  # no exercises.py handed in
    cy = {t["name"] for t in results_of(out, "cy")["tests"]}
    assert "exercises: NOT SUBMITTED" in cy  # neither file: one line for every exercise row


def test_the_feedback_shows_the_row_in_the_students_own_file_names(graded):
    out, _rows = graded
    bo = (out / "feedback" / "bo.txt").read_text(encoding="utf-8")
    assert "  exercise 7 " in bo and "FAILING" in bo
    reruns = [line for line in bo.splitlines() if "rerun: " in line]
    assert reruns and all("spec/postgres/test_pg_observe.py::" in line for line in reruns)
    assert all("--impl learner/ch13_leases.py" in line for line in reruns), reruns
    assert "lucyshop-grade-" not in bo and f"{ROOT}/" not in bo
    cy = (out / "feedback" / "cy.txt").read_text(encoding="utf-8")
    assert "no exercises.py or ch13_postgres.py was handed in" in cy
