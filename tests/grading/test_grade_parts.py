"""The grader's parts, each on small real inputs: finding hand-ins, the rubric, similarity,
Gradescope's results.json, the deadline, the bounded output and the autograder zip."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
import threading
import time
import zipfile
from decimal import Decimal
from pathlib import Path

import jsonschema
import pytest
from grading_class import HANGS, INDEPENDENT, REFERENCE, STUBS, renamed_reference, stubs_with
from mutants import BY_NAME

from lucyshop.lab.check.guard import Limits
from lucyshop.lab.check.results import Row
from lucyshop.lab.check.subjects import EXERCISES, FUNCTIONS
from lucyshop.lab.checkpoint.cases import Case
from lucyshop.lab.grade import rubric, submissions
from lucyshop.lab.grade.__main__ import main
from lucyshop.lab.grade.classroom import grade_class
from lucyshop.lab.grade.gradebook import COLUMNS
from lucyshop.lab.grade.gradescope import autograder, results
from lucyshop.lab.grade.similar import similarity
from lucyshop.lab.grade.verdict import Output, Verdict, from_json, verdict_on
from lucyshop.lab.services.processes import processes_mentioning

SCHEMA = json.loads(results.SCHEMA.read_text(encoding="utf-8"))


def exact_sum(values) -> Decimal:
    """The sum a person adding the numbers Gradescope shows gets (no binary rounding)."""
    return sum((Decimal(str(v)) for v in values), Decimal(0))


def validate(document: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)


def checked(status: str = "PASSING", passed: int = 4, cases: int = 7) -> Verdict:
    rows = [Row(f, "function", status, passed, 4) for f in FUNCTIONS]
    rows += [Row(e.label, "exercise", "NOT STARTED", 0, 4) for e in EXERCISES]
    return Verdict(
        "CHECKED",
        rows,
        "PASSING" if cases == 7 else "FAILING",
        [Case(n, f"case {n}", n < cases, "") for n in range(7)],
        feedback="the table",
    )


# ---------------------------------------------------------------- similarity


def test_a_renamed_reference_scores_at_least_0_9():
    assert similarity.similarity(renamed_reference()) >= 0.9


def test_an_independently_written_correct_file_scores_well_below():
    assert similarity.similarity(INDEPENDENT.read_text(encoding="utf-8")) < 0.5


def test_the_stubs_share_nothing_of_the_reference_beyond_the_starter_code():
    assert similarity.similarity(STUBS.read_text(encoding="utf-8")) == 0.0


def test_a_mutant_of_the_reference_is_still_the_reference():
    assert similarity.similarity(BY_NAME["observe_fence"].source()) >= 0.9


def test_comments_docstrings_literals_and_names_do_not_count():
    source = 'def f(a):\n    """Doc."""\n    # note\n    return a + 1\n'
    other = "def g(b):\n    return (b\n        + 2)\n"
    assert similarity.syntax_stream(source).tokens == similarity.syntax_stream(other).tokens
    assert similarity.syntax_stream("def g(b):\n    return b - 2\n").tokens != (
        similarity.syntax_stream(other).tokens
    )


def test_a_file_that_does_not_parse_is_compared_as_normalised_text():
    broken = REFERENCE.read_text(encoding="utf-8") + '\nx = """never closed\n'
    assert similarity.syntax_stream(broken) is None
    assert similarity.similarity(broken) >= 0.9
    assert similarity.similarity('x = """never closed\n') == 0.0


# ---------------------------------------------------------------- rubric


def test_the_shipped_rubric_weights_add_up():
    loaded = rubric.load()
    assert loaded.total == 100
    assert loaded.functions.weight("claim") == 2
    assert loaded.functions.weight("percentile") == 1


def test_every_row_passing_and_every_case_earns_functions_plus_checkpoint():
    loaded = rubric.load()
    assert rubric.score(checked(), loaded).points == loaded.functions.points + loaded.checkpoint


def test_partial_credit_is_tests_passed_over_tests_run():
    loaded = rubric.load()
    half = rubric.score(checked("FAILING", passed=2, cases=0), loaded).points
    assert half == pytest.approx(loaded.functions.points / 2)


def test_without_partial_credit_a_failing_row_earns_nothing(tmp_path):
    path = tmp_path / "rubric.toml"
    path.write_text("[functions]\npoints = 50\npartial = false\n[checkpoint]\npoints = 10\n")
    strict = rubric.load(path)
    assert rubric.score(checked("FAILING", passed=3, cases=7), strict).points == 10


def test_the_rubrics_limits_become_the_checks_options(tmp_path):
    assert rubric.load().limits == Limits(), "the shipped rubric keeps make check's deadlines"
    path = tmp_path / "rubric.toml"
    path.write_text("[limits]\nseconds = 300\ntest_seconds = 5\nimport_seconds = 20\n")
    loaded = rubric.load(path)
    assert loaded.seconds == 300
    assert loaded.limits.argv() == ["--test-timeout=5", "--load-timeout=20"]


@pytest.mark.parametrize("status", ["LEFT OUT", "NOT STARTED", "NOT SUBMITTED"])
def test_a_row_that_did_not_run_earns_nothing_whatever_its_counts_say(status):
    row = Row("exercise 5", "exercise", status, 6, 6)
    assert rubric.row_earns(row, 500, rubric.load().exercises) == 0
    assert (
        rubric.row_earns(
            Row("exercise 5", "exercise", "PASSING", 6, 6), 500, rubric.load().exercises
        )
        == 500
    )


def test_a_submission_that_could_not_be_checked_scores_zero():
    assert rubric.score(Verdict("TIMED OUT", error="too slow"), rubric.load()).points == 0


@pytest.mark.parametrize(
    "text",
    [
        "[functions]\npoints = -1\n",
        "[functions]\npartial = 'yes'\n",
        "[similarity]\nflag_at = 2\n",
        "[functions.weights]\nclaim = inf\n",
        "[limits]\ntest_seconds = 0\n",
        "[functions\n",
    ],
)
def test_a_bad_rubric_is_refused_with_what_is_wrong(tmp_path, text):
    path = tmp_path / "rubric.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match="rubric"):
        rubric.load(path)


# ---------------------------------------------------------------- finding hand-ins


def test_both_layouts_odd_names_and_a_directory_without_the_file_are_found(tmp_path):
    (tmp_path / "ana maría").mkdir()
    (tmp_path / "ana maría" / "ch13_leases.py").write_text("x = 1\n")
    (tmp_path / "ana maría" / "exercises.py").write_text("y = 1\n")
    (tmp_path / "bo.py").write_text("x = 2\n")
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy" / "notes.txt").write_text("oops\n")
    (tmp_path / ".hidden.py").write_text("")
    (tmp_path / "readme.txt").write_text("")
    found = {s.student: s for s in submissions.find(tmp_path)}
    assert sorted(found) == ["ana maría", "bo", "cy"]
    assert found["ana maría"].exercises == tmp_path / "ana maría" / "exercises.py"
    assert found["bo"].chapter == tmp_path / "bo.py" and found["bo"].exercises is None
    assert found["cy"].chapter is None and "no ch13_leases.py" in found["cy"].problem


def test_slugs_are_safe_and_distinct_for_names_that_look_alike():
    names = ["a b", "a-b", "a/b", "zoë", "zoe", ""]
    slugs = [submissions.slug(n) for n in names]
    assert len(set(slugs)) == len(names)
    assert all(s and "/" not in s and " " not in s and s.isascii() for s in slugs)


# ---------------------------------------------------------------- Gradescope results.json


@pytest.mark.parametrize(
    "verdict",
    [
        checked(),
        checked("FAILING", 1, 3),
        checked("PASSING", cases=0),
        Verdict("CANNOT CHECK", error="line 1: invalid"),
    ],
)
def test_results_json_follows_gradescopes_specification(verdict):
    loaded = rubric.load()
    document = results.document(
        verdict, loaded, scored=rubric.score(verdict, loaded), similarity=0.5
    )
    validate(document)
    assert exact_sum(t["max_score"] for t in document["tests"]) == Decimal(100)
    assert exact_sum(t["score"] for t in document["tests"]) == Decimal(str(document["score"]))
    assert document["score"] == rubric.score(verdict, loaded).points


def test_a_passing_row_worth_no_points_is_shown_passed_and_a_failing_one_failed():
    """open_worker_shop arrives written and weighs 0: Gradescope must not show it failed."""
    loaded = rubric.load()
    assert loaded.functions.weight("open_worker_shop") == 0
    verdict = checked()
    verdict.rows[FUNCTIONS.index("claim")] = Row("claim", "function", "FAILING", 1, 4)
    document = results.document(verdict, loaded, scored=rubric.score(verdict, loaded))
    status = {t["name"].split(" (")[0]: t["status"] for t in document["tests"]}
    assert (status["open_worker_shop"], status["enqueue"], status["claim"]) == (
        "passed",
        "passed",
        "failed",
    )


def test_the_schema_refuses_what_gradescope_would():
    with pytest.raises(jsonschema.ValidationError):
        validate({"tests": [{"name": "no score anywhere"}]})
    with pytest.raises(jsonschema.ValidationError):
        validate({"score": 1, "visibility": "sometimes"})


# ---------------------------------------------------------------- the check's JSON


def check_document(**changes) -> dict:
    """A ``ch13-check/2`` document as ``make check --json`` writes it."""
    rows = [
        {
            "label": label,
            "kind": kind,
            "status": "PASSING",
            "passed": 3,
            "total": 3,
            "message": "",
            "failures": [],
        }
        for label, kind in [(f, "function") for f in FUNCTIONS]
        + [(e.label, "exercise") for e in EXERCISES]
    ]
    exercise_6 = [row["label"] for row in rows].index("exercise 6")
    rows[exercise_6] |= {"status": "LEFT OUT", "passed": 0, "message": "left out by --no-measured"}
    rows[9] |= {"status": "FAILING", "passed": 1, "message": "timed out after 30 s in claim()"}
    cases = [{"case": n, "name": f"case {n}", "passed": n != 3, "message": ""} for n in range(7)]
    document = {
        "schema": "ch13-check/2",
        "impl": "x.py",
        "exit": 1,
        "summary": "15/16 functions PASSING",
        "error": None,
        "rows": rows,
        "checkpoint": {"status": "FAILING", "cases": cases, "tail": []},
        "feedback": "the table a student sees",
    }
    return document | changes


def test_a_verdict_is_read_from_the_checks_json():
    verdict = from_json(check_document(), "printed")
    loaded = rubric.load()
    assert verdict.status == "CHECKED" and verdict.feedback == "the table a student sees"
    assert len(verdict.rows) == 23  # 16 functions, 7 exercises
    assert [r.status for r in verdict.rows].count("PASSING") == 21
    assert verdict.checkpoint == "FAILING" and sum(c.passed for c in verdict.cases) == 6
    # claim weighs 2 of 18: 16 rows, 5 doubled, 3 ready-made rows at 0
    claim_share = loaded.functions.points * 2 / 18
    # exercise 6 (left out) weighs 1 of 8: six exercises at 1, exercise 7 at 2
    assert [loaded.exercises.weight(e.label) for e in EXERCISES] == [1, 1, 1, 1, 1, 1, 2]
    expected = (
        loaded.functions.points
        - claim_share * 2 / 3
        + loaded.exercises.points * 7 / 8
        + loaded.checkpoint * 6 / 7
    )
    assert rubric.score(verdict, loaded).points == pytest.approx(expected, abs=0.02)


def test_a_file_that_cannot_be_checked_or_an_unknown_schema_is_not_a_grade():
    assert from_json(check_document(error="does not compile: line 3"), "").status == (
        "CANNOT CHECK"
    )
    unknown = from_json(check_document(schema="ch13-check/9"), "")
    assert unknown.status == "CHECK ERROR" and "ch13-check/2" in unknown.error, unknown.error


# ---------------------------------------------------------------- bounded runs


def test_output_keeps_a_bounded_head_and_tail():
    output = Output()
    for _ in range(500):
        output.add(b"x" * 9_999 + b"\n")
    text = output.text()
    assert output.size == 5_000_000
    assert len(text) < 100_000 and "bytes of output left out" in text


def test_a_file_that_hangs_is_stopped_at_the_deadline(tmp_path):
    hanging = tmp_path / "hand-in" / "ch13_leases.py"
    hanging.parent.mkdir()
    hanging.write_text(stubs_with(HANGS))
    started = time.monotonic()
    verdict = verdict_on(hanging, tmp_path / "tmp", timeout=5, checkpoint=False)
    assert verdict.status == "TIMED OUT" and "5s" in verdict.error
    assert time.monotonic() - started < 30
    assert rubric.score(verdict, rubric.load()).points == 0
    # The check's import probe runs in a session of its own, outside the killed group, and
    # is reparented when the check dies: only the marker sweep finds it.
    assert processes_mentioning(str(hanging)) == []


def test_an_interrupted_grader_ends_the_running_check_at_once(tmp_path):
    hanging = tmp_path / "hand-in" / "ch13_leases.py"
    hanging.parent.mkdir()
    hanging.write_text(stubs_with(HANGS))
    stop = threading.Event()
    threading.Timer(2, stop.set).start()
    started = time.monotonic()
    verdict = verdict_on(hanging, tmp_path / "tmp", timeout=600, checkpoint=False, stop=stop)
    assert verdict.status == "STOPPED"
    assert time.monotonic() - started < 20
    assert processes_mentioning(str(hanging)) == []


def test_bad_hand_ins_each_get_a_row_and_do_not_stop_the_run(tmp_path):
    hand_ins = tmp_path / "class"
    (hand_ins / "no file").mkdir(parents=True)
    (hand_ins / "empty.py").write_text("  \n")
    (hand_ins / "syntax ✗.py").write_text("def (:\n")
    out = tmp_path / "out"
    graded = grade_class(submissions.find(hand_ins), out, rubric.load(), progress=False)
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    assert list(next(csv.reader((out / "grades.csv").open(encoding="utf-8")))) == list(COLUMNS)
    assert {name: row["status"] for name, row in rows.items()} == {
        "empty": "EMPTY",
        "no file": "NO FILE",
        "syntax ✗": "CANNOT CHECK",
    }
    assert "does not compile" in rows["syntax ✗"]["message"]
    # The student's own file, as their kit names it: never the grader's staging copy.
    assert rows["syntax ✗"]["message"].startswith("learner/ch13_leases.py does not compile")
    assert str(tmp_path) not in (out / "grades.csv").read_text(encoding="utf-8")
    assert all(row["score"] == "0" for row in rows.values())
    for item in graded:
        name = item.submission.student
        assert (out / "feedback" / f"{name}.txt").read_text(encoding="utf-8").strip()
        validate(json.loads((out / "gradescope" / name / "results.json").read_text()))


def test_jobs_below_one_are_refused(tmp_path):
    with pytest.raises(ValueError, match="jobs"):
        grade_class([], tmp_path, rubric.load(), jobs=0, progress=False)


# ---------------------------------------------------------------- the autograder


def test_the_autograder_zip_has_gradescopes_layout_and_the_kit(tmp_path):
    built = autograder.build(tmp_path / "autograder.zip")
    with zipfile.ZipFile(built) as archive:
        names = set(archive.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
    assert {"setup.sh", "run_autograder"} <= names
    assert all(modes[n] & stat.S_IXUSR for n in ("setup.sh", "run_autograder"))
    for needed in (
        "kit/pyproject.toml",
        "kit/src/lucyshop/lab/grade/gradescope/autograder.py",
        "kit/spec/learner/conftest.py",
        "kit/checkpoints/ch13_worker_recovery.py",
        "kit/solutions/ch13_leases.py",
        "kit/grading/rubric.toml",
    ):
        assert needed in names
    assert not [n for n in names if "__pycache__" in n or ".egg-info" in n]


def unpack(tmp_path: Path) -> Path:
    """A directory standing in for /autograder, as Gradescope lays it out."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(autograder.build(tmp_path / "autograder.zip")) as archive:
        archive.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    return subprocess.run(
        [str(root / "source" / "run_autograder")],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
    )


def test_run_autograder_without_the_chapter_file_writes_a_zero_result(tmp_path):
    root = unpack(tmp_path)
    (root / "submission" / "notes.md").write_text("forgot it")
    done = run_autograder(root)
    assert done.returncode == 0, done.stderr
    document = json.loads((root / "results" / "results.json").read_text())
    validate(document)
    assert document["score"] == 0 and "NO FILE" in document["output"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_run_autograder_grades_the_submission_from_its_own_copy_of_the_kit(tmp_path):
    root = unpack(tmp_path)
    nested = root / "submission" / "my work"
    nested.mkdir()
    (nested / "ch13_leases.py").write_text(BY_NAME["percentile_rank_truncated"].source())
    done = run_autograder(root)
    assert done.returncode == 0, done.stderr
    document = json.loads((root / "results" / "results.json").read_text())
    validate(document)
    tests = {t["name"].split(" (")[0]: t for t in document["tests"]}
    assert set(FUNCTIONS) <= set(tests)
    assert tests["claim"]["status"] == tests["open_worker_shop"]["status"] == "passed"
    assert tests["percentile"]["status"] == "failed"
    assert 0 < document["score"] < 100
    assert document["extra_data"]["similarity_to_reference"] >= 0.9
    assert f"kit at {root / 'source' / 'kit'}" in done.stdout  # the zip's kit graded it, not ours


# ---------------------------------------------------------------- the command


def test_the_command_grades_a_class_and_prints_one_line_per_student(tmp_path, capsys):
    hand_ins = tmp_path / "hand-ins"
    (hand_ins / "ana").mkdir(parents=True)
    (hand_ins / "bo.py").write_text("")
    assert main([str(hand_ins), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "ana" in printed and "NO FILE" in printed and "EMPTY" in printed
    assert (tmp_path / "hand-ins-grades" / "grades.csv").is_file()


@pytest.mark.parametrize("extra", [["--jobs", "0"], ["--timeout", "-1"], ["--rubric", "nope"]])
def test_the_command_refuses_bad_options_with_exit_2(tmp_path, capsys, extra):
    (tmp_path / "bo.py").write_text("")
    assert main([str(tmp_path), *extra]) == 2
    assert capsys.readouterr().err.startswith("make grade: ")
    assert not (tmp_path.with_name(f"{tmp_path.name}-grades")).exists()
