"""A whole fixture class graded in one run: the gradebook, Gradescope's files, the order of the
scores, the labels and the similarity flags across the class.

The class: the reference, the stubs, three mutants, a file that hangs, a syntax error, a
renamed and reformatted copy of the reference, an independently written correct file, a file
that prints megabytes, an empty file and a directory without the chapter file (those two hand
in the same exercises.py, one reformatted); odd names among them. No one else hands in an
exercises.py (each row says NOT SUBMITTED). Two are checked at a time. The checkpoint runs for
the reference, the stubs and the mutant it must catch (``observe_fence``); for the others it
would add minutes and no assertion.
"""

from __future__ import annotations

import csv
import dataclasses
import json

import jsonschema
import pytest
from grading_class import build

from lucyshop.lab.check.guard import Limits
from lucyshop.lab.check.subjects import EXERCISES, FUNCTIONS
from lucyshop.lab.grade import rubric, submissions
from lucyshop.lab.grade.classroom import grade_class
from lucyshop.lab.grade.gradebook import COLUMNS, column
from lucyshop.lab.grade.gradescope import results
from lucyshop.lab.loader import ROOT

WITH_CHECKPOINT = {"reference", "stubs", "mutant observe_fence"}
MUTANTS = ("mutant observe_fence", "mutant_expiry", "mutant_percentile")
IMPORT = 15  # seconds the class's rubric gives one import
GIVEN = ("open_worker_shop", "Claim.worker_id", "enqueue")  # score 0 by the rubric
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


def counts(row: dict[str, str], label: str) -> tuple[int, int]:
    return int(row[f"{column(label)}_passed"]), int(row[f"{column(label)}_total"])


def score(rows, name):
    return float(rows[name]["score"])


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_one_row_per_student_with_a_clear_status(graded_class):
    names, out, _rubric, rows = graded_class
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle)) == list(COLUMNS)
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
    for student in ("stubs", "chatty"):  # the chapter's ready-made parts arrive written
        assert {f: rows[student][f] for f in FUNCTIONS} == {
            f: "PASSING" if f in GIVEN else "NOT STARTED" for f in FUNCTIONS
        }


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_correct_files_pass_every_function_and_the_reference_every_case(graded_class):
    _names, _out, _rubric, rows = graded_class
    for name in ("reference", "zoë", "independent"):
        for function in FUNCTIONS:
            passed, total = counts(rows[name], function)
            assert passed == total > 0, (name, function, passed, total)
    reference = rows["reference"]
    assert (reference["checkpoint"], reference["checkpoint_passed"]) == ("PASSING", "7")
    assert reference["checkpoint_total"] == "7"
    assert rows["zoë"]["checkpoint"] == "SKIPPED" and rows["zoë"]["checkpoint_passed"] == ""
    mutant = rows["mutant observe_fence"]
    assert int(mutant["checkpoint_passed"]) < int(mutant["checkpoint_total"]) == 7
    # A checkpoint that earned cases says how many, never NOT STARTED or a bare FAILING.
    for name in ("mutant observe_fence", "stubs"):
        passed = int(rows[name]["checkpoint_passed"])
        if passed:
            assert rows[name]["checkpoint"] == f"{passed}/7 cases", name
        else:
            assert rows[name]["checkpoint"] in ("FAILING", "NOT STARTED"), name


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_a_missing_exercises_file_is_not_submitted_in_one_line(graded_class):
    _names, out, _rubric, rows = graded_class
    for label in (e.label for e in EXERCISES):
        assert rows["reference"][label] == "NOT SUBMITTED"
        assert counts(rows["reference"], label) == (0, 0)
    text = (out / "feedback" / "reference.txt").read_text(encoding="utf-8")
    assert not [line for line in text.splitlines() if line.startswith("  exercise ")]
    assert sum("NOT SUBMITTED" in line for line in text.splitlines()) == 3  # grade, row, summary
    document = json.loads((out / "gradescope" / "reference" / "results.json").read_text("utf-8"))
    exercises = [t for t in document["tests"] if "exercise" in t["tags"]]
    assert [(t["name"], t["score"]) for t in exercises] == [("exercises: NOT SUBMITTED", 0)]


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
def test_copies_between_students_are_flagged_and_independent_work_is_not(graded_class):
    _names, out, _rubric, rows = graded_class
    with (out / "similarity.csv").open(encoding="utf-8", newline="") as handle:
        found = list(csv.DictReader(handle))
    flagged = {(p["file"], frozenset((p["a"], p["b"]))) for p in found if p["flagged"] == "yes"}
    # A student's copy of a classmate's file, reformatted at 60 columns and renamed.
    assert ("ch13_leases.py", frozenset(("reference", "zoë"))) in flagged
    # A copied exercises.py, one of the two reformatted, between two students never checked.
    assert ("exercises.py", frozenset(("empty", "no_file"))) in flagged
    assert not [pair for pair in flagged if "independent" in pair[1]]
    assert not [pair for pair in flagged if {"stubs", "chatty", "hangs"} & pair[1]]
    assert rows["zoë"]["closest"] in ("reference", *MUTANTS)
    assert float(rows["zoë"]["closest_similarity"]) >= 0.9
    page = (out / "similarity.html").read_text(encoding="utf-8")
    assert "zoë" in page and "<table class='side'>" in page


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_every_student_gets_feedback_and_a_valid_results_json(graded_class):
    names, out, _rubric, rows = graded_class
    schema = json.loads(results.SCHEMA.read_text(encoding="utf-8"))
    for name in names:
        document = json.loads((out / "gradescope" / name / "results.json").read_text("utf-8"))
        jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)
        assert document["score"] == pytest.approx(float(rows[name]["score"]))
        feedback = (out / "feedback" / f"{name}.txt").read_text(encoding="utf-8")
        assert feedback.strip()
    reference = (out / "feedback" / "reference.txt").read_text(encoding="utf-8")
    assert "checkpoint" in reference
    mutant = (out / "feedback" / "mutant observe_fence.txt").read_text(encoding="utf-8")
    assert "rerun: " in mutant and "--impl learner/ch13_leases.py" in mutant
    for name in names:  # the student's own file names, never the grader's or the kit's paths
        text = (out / "feedback" / f"{name}.txt").read_text(encoding="utf-8")
        assert "lucyshop-grade-" not in text and f"{ROOT}/" not in text, name
        assert str(out.parent) not in text, name
    chatty = out / "feedback" / "chatty.txt"
    assert chatty.stat().st_size < 200_000  # 4 MB printed at every import, bounded here
