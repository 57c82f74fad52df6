"""A whole fixture class graded in one run: the gradebook, Gradescope's files, the order of the
scores and the similarity flags.

The class: the reference, the stubs, three mutants, a file that hangs, a syntax error, a
renamed copy of the reference, an independently written correct file, a file that prints
megabytes, an empty file and a directory without the chapter file; odd names among them. Two
are checked at a time. The checkpoint runs for the reference, the stubs and the mutant it must
catch (``observe_fence``); for the others it would add minutes and no assertion.
"""

from __future__ import annotations

import csv
import dataclasses
import json

import jsonschema
import pytest
from grading_class import build

from lucyshop.lab.grade import gradescope, rubric, submissions
from lucyshop.lab.grade.classroom import COLUMNS, grade_class
from lucyshop.lab.report import FUNCTIONS, Limits

WITH_CHECKPOINT = {"reference", "stubs", "mutant observe_fence"}
MUTANTS = ("mutant observe_fence", "mutant_expiry", "mutant_percentile")
IMPORT = 15  # seconds the class's rubric gives one import
ZERO = ("stubs", "hangs", "syntax error", "chatty", "empty", "no_file")


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    hand_ins = tmp_path_factory.mktemp("class")
    names = build(hand_ins)
    out = tmp_path_factory.mktemp("grades")
    # The class's own deadlines, shorter than the defaults: the hand-in that hangs at import
    # costs 15 s, not a minute, and the message must name them (the rubric reached the check).
    loaded = dataclasses.replace(rubric.load(), limits=Limits(load=IMPORT))
    found = submissions.find(hand_ins)
    grade_class(
        found,
        out,
        loaded,
        jobs=2,
        checkpoint=lambda s: s.student in WITH_CHECKPOINT,
        progress=False,
    )
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return names, out, loaded, {row["student"]: row for row in rows}


def score(rows, name):
    return float(rows[name]["score"])


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_one_row_per_student_with_a_clear_status(graded_class):
    names, out, _rubric, rows = graded_class
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle)) == COLUMNS
    assert sorted(rows) == sorted(names)
    status = {name: row["status"] for name, row in rows.items()}
    assert status == {
        "reference": "CHECKED",
        "stubs": "CHECKED",
        "mutant observe_fence": "CHECKED",
        "mutant_expiry": "CHECKED",
        "mutant_percentile": "CHECKED",
        "hangs": "CANNOT CHECK",
        "syntax error": "CANNOT CHECK",
        "zoë": "CHECKED",
        "independent": "CHECKED",
        "chatty": "CHECKED",
        "empty": "EMPTY",
        "no_file": "NO FILE",
    }
    assert f"did not finish importing within {IMPORT}s" in rows["hangs"]["message"]
    assert "does not compile" in rows["syntax error"]["message"]
    assert all(rows["stubs"][f] == "NOT STARTED" for f in FUNCTIONS)
    assert all(rows["chatty"][f] == "NOT STARTED" for f in FUNCTIONS)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_correct_files_pass_every_function_and_the_reference_every_case(graded_class):
    _names, _out, _rubric, rows = graded_class
    for name in ("reference", "zoë", "independent"):
        for function in FUNCTIONS:
            passed, total = rows[name][function].split("/")
            assert passed == total != "0", (name, function, rows[name][function])
    assert (rows["reference"]["checkpoint"], rows["reference"]["checkpoint_cases"]) == (
        "PASSED",
        "7/7",
    )
    assert rows["zoë"]["checkpoint"] == "SKIPPED"
    assert rows["mutant observe_fence"]["checkpoint"] == "FAILED"
    assert rows["mutant observe_fence"]["checkpoint_cases"] != "7/7"
    assert rows["stubs"]["checkpoint"] == "NOT STARTED"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_scores_are_in_the_order_of_the_work(graded_class):
    _names, _out, loaded, rows = graded_class
    functions_and_checkpoint = loaded.functions.points + loaded.checkpoint
    assert score(rows, "reference") == functions_and_checkpoint  # no exercises.py handed in
    assert score(rows, "zoë") == score(rows, "independent") == loaded.functions.points
    # Each mutant loses points against the correct file graded the same way (with or without
    # the checkpoint), and still earns the points of what it got right.
    assert 0 < score(rows, "mutant observe_fence") < score(rows, "reference")
    for mutant in ("mutant_expiry", "mutant_percentile"):
        assert 0 < score(rows, mutant) < score(rows, "zoë"), mutant
    for name in ZERO:
        assert score(rows, name) == 0, name


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_who_handed_in_the_reference_is_flagged(graded_class):
    _names, _out, loaded, rows = graded_class
    for name in ("reference", "zoë", *MUTANTS):
        assert float(rows[name]["similarity"]) >= 0.9 and rows[name]["flagged"] == "yes", name
    assert float(rows["independent"]["similarity"]) < 0.5
    assert rows["independent"]["flagged"] == ""
    assert float(rows["stubs"]["similarity"]) == 0 and rows["stubs"]["flagged"] == ""
    assert loaded.flag_at > 0.5


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_every_student_gets_feedback_and_a_valid_results_json(graded_class):
    names, out, _rubric, rows = graded_class
    schema = json.loads(gradescope.SCHEMA.read_text(encoding="utf-8"))
    for name in names:
        document = json.loads((out / "gradescope" / name / "results.json").read_text("utf-8"))
        jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
        assert document["score"] == pytest.approx(float(rows[name]["score"]))
        feedback = (out / "feedback" / f"{name}.txt").read_text(encoding="utf-8")
        assert feedback.strip()
    reference = (out / "feedback" / "reference.txt").read_text(encoding="utf-8")
    assert "checkpoint" in reference
    assert "lucyshop-grade-" not in reference  # rerun commands name the hand-in, not a copy
    chatty = out / "feedback" / "chatty.txt"
    assert chatty.stat().st_size < 200_000  # 4 MB printed at every import, bounded here
