"""Grade a whole class: each hand-in judged alone, a few at a time, into one gradebook.

For every submission: a private work directory (its staged copy and its ``TMPDIR``), one
``make check`` child under a deadline, a score from the rubric, a similarity to the reference.
Then ``OUT/grades.csv`` (one row per student), ``OUT/feedback/<student>.txt`` (what ``make
check`` showed) and ``OUT/gradescope/<student>/results.json``. A hand-in that cannot be
graded (no file, empty, does not compile, hangs) gets its row with a status saying so; nothing
a submission does stops the others.
"""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from lucyshop.lab.grade import gradescope, similarity
from lucyshop.lab.grade.rubric import CHECKPOINT_CASES, Rubric, score
from lucyshop.lab.grade.submissions import Submission, stage
from lucyshop.lab.grade.verdict import Verdict, judge
from lucyshop.lab.report import EXERCISES, FUNCTIONS


@dataclass
class Graded:
    submission: Submission
    verdict: Verdict
    similarity: float | None
    score: float
    flagged: bool


def grade_one(
    submission: Submission,
    work: Path,
    rubric: Rubric,
    *,
    checkpoint: bool = True,
    stop: threading.Event | None = None,
) -> Graded:
    """Judge one hand-in in ``work`` (created, then removed) and score it."""
    if submission.problem:
        verdict = Verdict("NO FILE", error=submission.problem)
        return Graded(submission, verdict, None, 0.0, False)
    source = submission.chapter.read_bytes()
    text = source.decode("utf-8", "replace")
    like = similarity.similarity(text)
    flagged = like is not None and like >= rubric.flag_at
    if not text.strip():
        verdict = Verdict("EMPTY", error=f"{submission.chapter.name} is empty")
        return Graded(submission, verdict, like, 0.0, flagged)
    try:
        staged = stage(submission, work / "submission")
        verdict = judge(
            staged,
            work / "tmp",
            timeout=rubric.seconds,
            checkpoint=checkpoint,
            stop=stop,
            limits=rubric.limits,
        )
        # Show the student's own path, not the staging copy that is about to go.
        original = shlex.quote(str(submission.chapter))
        verdict.feedback = verdict.feedback.replace(str(staged), original)
        verdict.error = verdict.error.replace(str(staged), original)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Graded(submission, verdict, like, score(verdict, rubric), flagged)


def grade_class(
    submissions: list[Submission],
    out: Path,
    rubric: Rubric,
    *,
    jobs: int = 2,
    checkpoint: bool | Callable[[Submission], bool] = True,
    progress: bool = True,
) -> list[Graded]:
    """Grade every submission, ``jobs`` at a time, and write the gradebook under ``out``."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    wants = checkpoint if callable(checkpoint) else (lambda _s: checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    graded: list[Graded] = []
    stop = threading.Event()  # set on Ctrl-C or an error: running checks end within a poll
    with (
        tempfile.TemporaryDirectory(prefix="lucyshop-grade-") as scratch,
        ThreadPoolExecutor(max_workers=jobs) as pool,
    ):
        futures = [
            pool.submit(
                grade_one, sub, Path(scratch) / sub.slug, rubric, checkpoint=wants(sub), stop=stop
            )
            for sub in submissions
        ]
        bar = tqdm(total=len(futures), desc="grading", unit="student", disable=not progress)
        try:
            for future in as_completed(futures):
                graded.append(future.result())
                bar.update()
        except BaseException:
            stop.set()
            for future in futures:
                future.cancel()
            raise
        finally:
            bar.close()
    graded.sort(key=lambda g: g.submission.student)
    write(graded, out, rubric)
    return graded


def write(graded: list[Graded], out: Path, rubric: Rubric) -> None:
    write_csv(graded, out / "grades.csv", rubric)
    for item in graded:
        name = item.submission.student
        feedback = out / "feedback" / f"{name}.txt"
        feedback.parent.mkdir(parents=True, exist_ok=True)
        feedback.write_text(feedback_text(item), encoding="utf-8")
        result = out / "gradescope" / name / "results.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        document = gradescope.results(item.verdict, rubric, similarity=item.similarity)
        result.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")


def feedback_text(item: Graded) -> str:
    verdict = item.verdict
    if verdict.status == "CHECKED":
        return verdict.feedback
    return f"{verdict.status}: {verdict.error}\n\n{verdict.feedback}".rstrip() + "\n"


COLUMNS = (
    ["student", "status", "score", "max_score", "similarity", "flagged"]
    + list(FUNCTIONS)
    + [label for label, _module, _stubs in EXERCISES]
    + ["checkpoint", "checkpoint_cases", "seconds", "message"]
)


def write_csv(graded: list[Graded], path: Path, rubric: Rubric) -> None:
    """One row per student; a function or exercise cell is ``passed/total``, or its status."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for item in graded:
            writer.writerow(csv_row(item, rubric))


def csv_row(item: Graded, rubric: Rubric) -> dict[str, str]:
    verdict = item.verdict
    row = {
        "student": item.submission.student,
        "status": verdict.status,
        "score": f"{item.score:g}",
        "max_score": f"{rubric.total:g}",
        "similarity": "" if item.similarity is None else f"{item.similarity:.3f}",
        "flagged": "yes" if item.flagged else "",
        "checkpoint": verdict.checkpoint if verdict.status == "CHECKED" else "",
        "checkpoint_cases": (
            f"{sum(c.passed for c in verdict.cases)}/{max(len(verdict.cases), CHECKPOINT_CASES)}"
            if verdict.status == "CHECKED" and verdict.checkpoint != "SKIPPED"
            else ""
        ),
        "seconds": f"{verdict.seconds:.0f}",
        "message": verdict.error,
    }
    for found in verdict.rows:
        cell = f"{found.passed}/{found.total}"
        row[found.label] = cell if found.status in ("PASSING", "FAILING") else found.status
    return {column: row.get(column, "") for column in COLUMNS}
