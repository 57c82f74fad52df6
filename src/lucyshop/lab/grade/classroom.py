"""Grade a whole class: each hand-in checked alone, a few at a time, kept as soon as it is known.

For every submission: a private work directory (its staged copy and its ``TMPDIR``), one
``make check`` child under a deadline, a score from the rubric (its lines worked out once, then
rendered as the feedback and ``results.json``), a similarity to the reference.
Its feedback, ``results.json`` and result are written the moment it finishes (``store``), so
Ctrl-C loses only the checks still running, and a rerun skips every hand-in already graded
under the same files, rubric and kit. Only when every check of the class is gone are the
class-wide files written from the kept results (``gradebook``): ``grades.csv``, the
similarity report across the class and, with a roster, ``canvas.csv``. A hand-in that cannot
be graded (no file, empty, does not compile, hangs) gets its row with a status saying so;
nothing a submission does stops the others.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from lucyshop.lab.grade import feedback, gradebook, store
from lucyshop.lab.grade.rubric import Rubric, score
from lucyshop.lab.grade.similar import similarity
from lucyshop.lab.grade.store import Graded
from lucyshop.lab.grade.submissions import Submission, stage
from lucyshop.lab.grade.verdict import Verdict, verdict_on
from lucyshop.lab.loader import EXERCISES, PG_FILE
from lucyshop.lab.sandbox import isolation, jail
from lucyshop.lab.statuses import VerdictStatus

__all__ = ["Graded", "Interrupted", "Options", "default_jobs", "feedback_text", "grade_class"]


def default_jobs() -> int:
    """Cores + 1: about a third of a check is spent waiting on leases, deadlines and processes."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + 1


@dataclass(frozen=True)
class Options:
    """How ``grade_class`` runs, beyond the rubric."""

    jobs: int = field(default_factory=default_jobs)
    force: bool = False  # regrade hand-ins whose results are kept
    archive: Path | None = None  # earlier hand-ins, compared with this class
    roster: Path | None = None  # folder -> ID and e-mail (gradebook.load_roster)
    bom: bool = False  # CSV files start with a UTF-8 byte-order mark (Excel)
    assignment: str = gradebook.ASSIGNMENT  # canvas.csv's grade column
    progress: bool = True


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) while grading: how many of the class have kept results."""

    def __init__(self, kept: int, total: int) -> None:
        super().__init__(f"interrupted: {kept} of {total} graded, kept; rerun to go on")
        self.kept, self.total = kept, total


def grade_one(
    submission: Submission,
    work: Path,
    rubric: Rubric,
    *,
    checkpoint: bool = True,
    stop: threading.Event | None = None,
) -> Graded:
    """Check one hand-in in ``work`` (created, then removed) and score it."""
    if submission.problem or submission.chapter is None:
        verdict = Verdict(VerdictStatus.NO_FILE, error=submission.problem)
        return Graded(submission, verdict, None, score(verdict, rubric), False)
    text = submission.chapter.read_bytes().decode("utf-8", "replace")
    like = similarity.similarity(text)
    flagged = like >= rubric.flag_at or bool(similarity.hiding(text))
    if not text.strip():
        verdict = Verdict(VerdictStatus.EMPTY, error="learner/ch13_leases.py is empty")
        return Graded(submission, verdict, like, score(verdict, rubric), flagged)
    try:
        staged = stage(submission, work / "submission")
        verdict = verdict_on(
            staged,
            work / "tmp",
            timeout=rubric.seconds,
            checkpoint=checkpoint,
            stop=stop,
            limits=rubric.limits,
        )
        feedback.scrubbed(verdict, staged.parent, work)
    finally:
        jail.remove_tree(work)
    missing = [
        name
        for name, path in ((EXERCISES, submission.exercises), (PG_FILE, submission.postgres))
        if path is None
    ]
    feedback.not_submitted(verdict, missing)
    return Graded(submission, verdict, like, score(verdict, rubric), flagged)


def feedback_text(item: Graded) -> str:
    """What the student reads (the autograder prints it)."""
    return feedback.text(item.verdict, item.score)


def grade_class(
    submissions: list[Submission],
    out: Path,
    rubric: Rubric,
    *,
    jobs: int | None = None,
    checkpoint: bool | Callable[[Submission], bool] = True,
    progress: bool = True,
    options: Options | None = None,
    say: Callable[[str], None] = print,
) -> list[Graded]:
    """Grade every submission not already graded, then write the class's files under ``out``.

    Raises ``Interrupted`` on Ctrl-C, after every running check has ended and what finished
    is kept.
    """
    options = options or Options(progress=progress)
    jobs = options.jobs if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    wants = checkpoint if callable(checkpoint) else (lambda _s: checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)  # the grades and every student's feedback: the instructor's alone
    if isolation() == "user":  # every other check's uid is an "other" here
        folders = {s.chapter.parent for s in submissions if s.chapter is not None}
        if closed := jail.closed_to_others(sorted(folders)):
            say(f"user mode: closed {len(closed)} hand-in folders to other users (chmod o-rwx)")
    keys: dict[str, dict[str, str]] = {}
    try:
        keys |= {s.student: store.key(s, rubric, wants(s)) for s in submissions}
        todo = [s for s in submissions if options.force or not store.kept(out, s, keys[s.student])]
        if len(todo) < len(submissions):
            say(
                f"skipped {len(submissions) - len(todo)} of {len(submissions)} hand-ins already"
                " graded with the same files, rubric and kit (--force regrades them)"
            )
        try:
            interrupted = _run(todo, out, rubric, jobs, wants, keys, options.progress)
        finally:
            jail.clear_free_uids()  # what a check that had to be killed left (user mode)
        if interrupted:
            raise KeyboardInterrupt
        results = [store.kept(out, s, None) for s in submissions]
        missing = [s.student for s, r in zip(submissions, results, strict=True) if r is None]
        if missing:  # only a write that failed under the grader could do this
            raise RuntimeError(f"no result was kept for {', '.join(missing)}")
        gradebook.write_class(results, out, rubric, options, say)
    except KeyboardInterrupt:
        done = sum(
            s.student in keys and store.kept(out, s, keys[s.student]) is not None
            for s in submissions
        )
        raise Interrupted(done, len(submissions)) from None
    return results


def _run(
    todo: list[Submission],
    out: Path,
    rubric: Rubric,
    jobs: int,
    wants: Callable[[Submission], bool],
    keys: dict[str, dict[str, str]],
    progress: bool,
) -> bool:
    """Grade ``todo`` ``jobs`` at a time, keeping each result; True when interrupted."""
    stop = threading.Event()  # set on Ctrl-C: running checks end within a poll
    interrupted = False

    def one(sub: Submission, work: Path) -> bool:
        if stop.is_set():
            return False
        graded = grade_one(sub, work, rubric, checkpoint=wants(sub), stop=stop)
        return store.keep(out, graded, rubric, keys[sub.student])

    with tempfile.TemporaryDirectory(prefix="lucyshop-grade-") as scratch:
        pool = ThreadPoolExecutor(max_workers=jobs)
        futures: list[Future[bool]] = [
            pool.submit(one, sub, Path(scratch) / sub.slug) for sub in todo
        ]
        bar = tqdm(total=len(futures), desc="grading", unit="student", disable=not progress)
        try:
            for future in as_completed(futures):
                future.result()
                bar.update()
        except KeyboardInterrupt:
            stop.set()
            interrupted = True
            with _signals_ignored():
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            stop.set()
            bar.close()
            pool.shutdown(wait=True, cancel_futures=True)
    return interrupted


@contextmanager
def _signals_ignored() -> Iterator[None]:
    """A second Ctrl-C (or a SIGTERM) while the running checks are ended must not cut that
    short: it would leave their process groups running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = (signal.SIGINT, signal.SIGTERM)
    previous = [signal.signal(number, signal.SIG_IGN) for number in held]
    try:
        yield
    finally:
        for number, handler in zip(held, previous, strict=True):
            signal.signal(number, handler)
