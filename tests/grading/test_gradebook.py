"""The gradebook, the labels and Gradescope's numbers, on verdicts made here (no check runs):
numeric passed/total columns and a roster join with a Canvas-shaped CSV; NOT SUBMITTED for a
missing exercises.py; ``3/7 cases``; the student's own file names in the feedback; each
test's visibility from the rubric, and max_score values that add up to the total exactly
under several rubrics.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from decimal import Decimal
from pathlib import Path

import jsonschema
import pytest
from grading_class import REFERENCE

from lucyshop.lab import loader
from lucyshop.lab.check.results import Row
from lucyshop.lab.check.subjects import EXERCISES, FUNCTIONS
from lucyshop.lab.checkpoint.cases import Case
from lucyshop.lab.grade import feedback, gradebook, rubric
from lucyshop.lab.grade.classroom import Options
from lucyshop.lab.grade.gradescope import results
from lucyshop.lab.grade.store import Graded
from lucyshop.lab.grade.submissions import Submission
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import ROOT

SCHEMA = json.loads(results.SCHEMA.read_text(encoding="utf-8"))
EXERCISE_LABELS = [e.label for e in EXERCISES]
BOTH = [loader.EXERCISES, loader.PG_FILE]  # every file of exercises left out


def verdict(
    *, passed: int = 4, cases: int = 7, checkpoint: str = "PASSING", exercises: str = "PASSING"
) -> Verdict:
    """A checked verdict: every function ``passed`` of 4, each exercise ``exercises``."""
    rows = [
        Row(f, "function", "PASSING" if passed == 4 else "FAILING", passed, 4) for f in FUNCTIONS
    ]
    rows += [
        Row(label, "exercise", exercises, 4 if exercises == "PASSING" else 0, 4)
        for label in EXERCISE_LABELS
    ]
    table = "\n".join(f"  {r.label:<20}{r.status:<13}{r.passed}/{r.total}" for r in rows)
    return Verdict(
        "CHECKED",
        rows,
        checkpoint,
        [Case(n, f"case {n}", n < cases, "") for n in range(7)] if checkpoint != "SKIPPED" else [],
        feedback=f"make check: learner/ch13_leases.py\n\n{table}\n\n16/16 functions PASSING"
        " · checkpoint PASSING · exercises: 0 of 6 not started\n",
    )


def graded(tmp_path: Path, name: str, found: Verdict, source: Path = REFERENCE) -> Graded:
    folder = tmp_path / "class" / name
    folder.mkdir(parents=True, exist_ok=True)
    chapter = folder / "ch13_leases.py"
    chapter.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    loaded = rubric.load()
    return Graded(Submission(name, chapter), found, 0.5, rubric.score(found, loaded), False)


def read_csv(path: Path, encoding: str = "utf-8") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding=encoding))))


def exact_sum(values) -> Decimal:
    return sum((Decimal(str(v)) for v in values), Decimal(0))


# ---------------------------------------------------------------- the gradebook's cells


def test_every_count_is_a_number_in_its_own_column_never_x_slash_y(tmp_path):
    items = [
        graded(tmp_path, "ana", verdict()),
        graded(tmp_path, "bo", verdict(passed=3, cases=3, checkpoint="FAILING")),
        Graded(
            Submission("cy", None, problem="no ch13_leases.py"),
            Verdict("NO FILE"),
            None,
            rubric.score(Verdict("NO FILE"), rubric.load()),
            False,
        ),
    ]
    gradebook.write_class(items, tmp_path, rubric.load(), Options(), say=lambda _l: None)
    text = (tmp_path / "grades.csv").read_text(encoding="utf-8")
    date_like = re.search(r"(^|,)\d+/\d+(,|$)", text, re.MULTILINE)
    assert not date_like, "a cell a spreadsheet reads as a date"
    rows = {r["student"]: r for r in read_csv(tmp_path / "grades.csv")}
    assert rows["ana"]["claim_passed"] == "4" and rows["ana"]["claim_total"] == "4"
    assert rows["bo"]["claim"] == "FAILING" and rows["bo"]["claim_passed"] == "3"
    assert rows["bo"]["exercise_1_total"] == "4" and rows["bo"]["checkpoint_passed"] == "3"
    assert rows["bo"]["checkpoint_total"] == "7" and rows["bo"]["checkpoint"] == "3/7 cases"
    assert rows["cy"]["status"] == "NO FILE" and rows["cy"]["claim_passed"] == ""
    for row in rows.values():
        for column, value in row.items():
            if column.endswith(("_passed", "_total")) and value:
                int(value)
        float(row["score"])


def test_a_checkpoint_that_earned_cases_is_never_not_started():
    found = verdict(cases=3, checkpoint="NOT STARTED")
    assert feedback.checkpoint_label(found) == "3/7 cases"
    assert (
        "checkpoint 3/7 cases" in feedback.grade_lines(found, rubric.score(found, rubric.load()))[0]
    )
    assert feedback.checkpoint_label(verdict(cases=0, checkpoint="NOT STARTED")) == "NOT STARTED"
    assert feedback.checkpoint_label(verdict()) == "PASSING"
    assert feedback.checkpoint_label(verdict(checkpoint="SKIPPED")) == "SKIPPED"


def test_a_bom_only_when_asked(tmp_path):
    items = [graded(tmp_path, "zoë", verdict())]
    gradebook.write_class(items, tmp_path / "plain", rubric.load(), Options(), say=print)
    gradebook.write_class(items, tmp_path / "bom", rubric.load(), Options(bom=True), say=print)
    assert not (tmp_path / "plain" / "grades.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    with_bom = (tmp_path / "bom" / "grades.csv").read_bytes()
    assert with_bom.startswith(b"\xef\xbb\xbf") and "zoë".encode() in with_bom
    assert read_csv(tmp_path / "bom" / "grades.csv", "utf-8-sig")[0]["student"] == "zoë"
    assert (tmp_path / "bom" / "similarity.csv").read_bytes().startswith(b"\xef\xbb\xbf")


# ---------------------------------------------------------------- the roster


ROSTER = (
    "\ufeffFolder,Name,ID,SIS User ID,Email,Section\n"
    "Ana,Ana Alves,1001,s1001,ana@uni.example,A\n"
    "zoë,Zoë Zed,1002,s1002,zoe@uni.example,B\n"
    "dee,Dee Dee,1003,s1003,dee@uni.example,A\n"
)


def test_the_roster_joins_folders_to_ids_and_writes_a_canvas_csv(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    items = [
        graded(tmp_path, "ana", verdict()),
        graded(tmp_path, "zoë", verdict(passed=2, cases=0, checkpoint="FAILING")),
        graded(tmp_path, "stranger", verdict()),
    ]
    said: list[str] = []
    options = Options(roster=roster, assignment="Chapter 13 (4242)")
    gradebook.write_class(items, tmp_path / "out", rubric.load(), options, say=said.append)
    rows = {r["student"]: r for r in read_csv(tmp_path / "out" / "grades.csv")}
    assert (rows["ana"]["id"], rows["ana"]["email"]) == ("1001", "ana@uni.example")
    assert rows["zoë"]["id"] == "1002" and rows["stranger"]["id"] == ""
    with (tmp_path / "out" / "canvas.csv").open(encoding="utf-8", newline="") as handle:
        canvas = list(csv.reader(handle))
    assert canvas[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "Chapter 13 (4242)",
    ]
    assert canvas[1][0].strip() == "Points Possible" and canvas[1][-1] == "100"
    by_id = {line[1]: line for line in canvas[2:]}
    assert set(by_id) == {"1001", "1002", "1003"}  # the roster's students, in its order
    assert by_id["1001"] == [
        "Ana Alves",
        "1001",
        "s1001",
        "ana@uni.example",
        "A",
        rows["ana"]["score"],
    ]
    assert float(by_id["1002"][-1]) == float(rows["zoë"]["score"]) < 100
    assert by_id["1003"][-1] == ""  # no hand-in: left for the instructor
    assert any("stranger" in line for line in said) and any("dee" in line for line in said)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("name,id\nAna,1\n", "needs a 'folder' column"),
        ("folder,id\nana,1\nANA,2\n", "twice"),
    ],
)
def test_a_bad_roster_is_refused_saying_why(tmp_path, text, problem):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=problem):
        gradebook.load_roster(path)


# ---------------------------------------------------------------- NOT SUBMITTED


def test_a_missing_exercises_file_is_one_line_not_submitted_worth_nothing():
    """Neither exercises.py nor ch13_postgres.py handed in: every exercise row NOT SUBMITTED,
    one line for them all."""
    loaded = rubric.load()
    found = feedback.not_submitted(verdict(exercises="NOT STARTED"), BOTH)
    scored = rubric.score(found, loaded)
    exercise_rows = [r for r in found.rows if r.kind == "exercise"]
    assert {r.status for r in exercise_rows} == {"NOT SUBMITTED"}
    lines = feedback.check_text(found, scored).splitlines()
    assert not [line for line in lines if line.startswith("  exercise ")]
    mentions = [line for line in lines if "NOT SUBMITTED" in line]
    assert len(mentions) == 2  # the one table line and the summary line
    assert "0 of 20 points" in mentions[0] and "exercises: NOT SUBMITTED" in mentions[1]
    assert "exercises NOT SUBMITTED 0/20" in feedback.grade_lines(found, scored)[0]
    document = results.document(found, loaded, scored=scored)
    tests = [t for t in document["tests"] if "exercise" in t["tags"]]
    assert [(t["name"], t["score"], t["max_score"]) for t in tests] == [
        ("exercises: NOT SUBMITTED", 0, 20)
    ]
    assert rubric.score(found, loaded).points == loaded.functions.points + loaded.checkpoint


@pytest.mark.parametrize(
    ("missing", "name", "points"),
    [
        (loader.PG_FILE, "exercise 7", 5),  # 2 of the 8 weights of the exercises' 20
        (loader.EXERCISES, "exercises 1-6", 15),
    ],
)
def test_one_missing_file_makes_its_own_rows_not_submitted_and_no_other(missing, name, points):
    """Only ch13_postgres.py (exercise 7) missing, or only exercises.py: its rows are one NOT
    SUBMITTED line worth nothing, the other file's rows keep their status and points, and the
    lines still add up to the total exactly."""
    loaded = rubric.load()
    found = feedback.not_submitted(verdict(), [missing])
    mine = set(feedback.ROWS_OF[missing])
    assert {r.status for r in found.rows if r.label in mine} == {"NOT SUBMITTED"}
    assert {r.status for r in found.rows if r.kind == "exercise" and r.label not in mine} == {
        "PASSING"
    }
    why = f"no {missing} was handed in"
    assert all(r.message == why for r in found.rows if r.label in mine)
    lines = feedback.check_text(found, rubric.score(found, loaded)).splitlines()
    assert not [line for line in lines if line[2:12] in mine and "NOT SUBMITTED" not in line]
    mentions = [line for line in lines if "NOT SUBMITTED" in line]
    assert mentions[0].startswith(f"  {name}") and f"{why}: 0 of {points} points" in mentions[0]
    assert mentions[-1].endswith(f"({name} NOT SUBMITTED)"), mentions  # the summary line
    document = results.document(found, loaded, scored=rubric.score(found, loaded))
    jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)
    tests = {t["name"]: t for t in document["tests"] if "exercise" in t["tags"]}
    line = tests[f"{name}: NOT SUBMITTED"]
    assert (line["score"], line["max_score"]) == (0, points)
    assert line["output"] == f"{why}: 0 of {points} points"
    assert exact_sum(t["max_score"] for t in document["tests"]) == Decimal(str(loaded.total))
    assert rubric.score(found, loaded).points == loaded.total - points


# ---------------------------------------------------------------- the student's file names


def test_feedback_names_the_students_own_files_never_the_graders_paths(tmp_path):
    work = tmp_path / "lucyshop-grade-x1" / "ana-1234"
    staged = work / "submission"
    text = (
        f"make check: {staged}/ch13_leases.py, with the reference solutions blocked\n"
        f"  rerun: {sys.executable} -m pytest {ROOT}/spec/learner/test_claim.py"
        f" --impl {staged}/ch13_leases.py\n"
        f'  File "{staged}/exercises.py", line 3\n'
        f"  shop at {work}/tmp/lucyshop-check-9/shop.db\n"
    )
    cleaned = feedback.scrub(text, staged, work)
    assert str(tmp_path) not in cleaned and str(ROOT) not in cleaned
    assert "--impl learner/ch13_leases.py" in cleaned
    assert 'File "learner/exercises.py"' in cleaned
    assert "spec/learner/test_claim.py" in cleaned and "$TMPDIR/tmp/" in cleaned


# ---------------------------------------------------------------- Gradescope's numbers


def test_each_test_carries_its_parts_visibility():
    loaded = rubric.load()
    assert loaded.checkpoint_visibility == "after_due_date"
    assert loaded.functions.visibility == loaded.exercises.visibility == "visible"
    failed = verdict(cases=5, checkpoint="FAILING")
    document = results.document(failed, loaded, scored=rubric.score(failed, loaded))
    jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)
    seen = {
        tag: {t["visibility"] for t in document["tests"] if tag in t["tags"]}
        for tag in ("function", "exercise", "checkpoint")
    }
    assert seen == {
        "function": {"visible"},
        "exercise": {"visible"},
        "checkpoint": {"after_due_date"},
    }


RUBRICS = [
    "",  # the defaults: functions 0, exercises 0, checkpoint 0
    (ROOT / "grading" / "rubric.toml").read_text(encoding="utf-8"),
    (
        "[functions]\npoints = 33.33\n[functions.weights]\nclaim = 3\nfinish = 7\n"
        "percentile = 0.5\n[exercises]\npoints = 11.11\nvisibility = 'hidden'\n"
        "[checkpoint]\npoints = 55.56\nvisibility = 'after_published'\n"
    ),
    "[functions]\npoints = 1\n[exercises]\npoints = 0.07\n[checkpoint]\npoints = 0.05\n",
    "[functions]\npoints = 100\npartial = false\n[functions.weights]\nclaim = 0\n",
]


@pytest.mark.parametrize("text", RUBRICS, ids=["empty", "shipped", "odd", "tiny", "strict"])
@pytest.mark.parametrize(
    "found",
    [
        verdict(),
        verdict(passed=1, cases=2, checkpoint="FAILING", exercises="NOT STARTED"),
        verdict(passed=3, checkpoint="SKIPPED"),
        Verdict("TIMED OUT", error="too slow"),
    ],
    ids=["all", "some", "skipped", "timed-out"],
)
def test_max_scores_add_up_to_the_total_exactly_and_scores_to_the_score(tmp_path, text, found):
    path = tmp_path / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    loaded = rubric.load(path)
    document = results.document(found, loaded, scored=rubric.score(found, loaded))
    jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)
    tests = document["tests"]
    parts = (loaded.functions.points, loaded.exercises.points, loaded.checkpoint)
    assert exact_sum(t["max_score"] for t in tests) == exact_sum(parts)
    assert exact_sum(t["score"] for t in tests) == Decimal(str(document["score"]))
    assert document["score"] == rubric.score(found, loaded).points <= loaded.total
    assert all(t["score"] <= t["max_score"] for t in tests)
    assert {t["visibility"] for t in tests} <= set(rubric.VISIBILITIES)
    again = results.document(found, loaded, scored=rubric.score(found, loaded))
    assert document == again, "the same split every time"


def test_shares_go_to_the_largest_remainders_earliest_first():
    assert rubric.shares(100, [1] * 7) == [1429, 1429, 1429, 1429, 1428, 1428, 1428]
    assert rubric.shares(1, [1, 1, 1]) == [34, 33, 33]
    assert rubric.shares(10, [2, 1]) == [667, 333]
    assert sum(rubric.shares(60, [2, 2, 1, 1, 1, 2, 2] + [1] * 9)) == 6000


def test_sixteen_half_passing_rows_earn_exactly_half():
    assert (
        rubric.score(
            verdict(passed=2, checkpoint="SKIPPED", exercises="NOT STARTED"), rubric.load()
        ).points
        == 30
    )


@pytest.mark.parametrize(
    "text",
    [
        "[checkpoint]\nvisibility = 'sometimes'\n",
        "[functions]\nvisibility = 1\n",
        "[functions]\npoints = 10.005\n",
    ],
)
def test_a_bad_visibility_or_a_fraction_of_a_hundredth_is_refused(tmp_path, text):
    path = tmp_path / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="rubric"):
        rubric.load(path)


def test_the_rubric_digest_changes_with_what_changes_a_grade(tmp_path):
    path = tmp_path / "rubric.toml"
    path.write_text("[functions]\npoints = 60\n", encoding="utf-8")
    first = rubric.load(path)
    assert first.digest == rubric.load(path).digest
    assert rubric.with_seconds(first, 30).digest != first.digest
    path.write_text("[functions]\npoints = 61\n", encoding="utf-8")
    assert rubric.load(path).digest != first.digest
