"""One student's graded result, kept on disk the moment it is known, so a class can resume.

Under ``OUT``: ``feedback/<student>.txt``, ``gradescope/<student>/results.json`` and, written
last, ``results/<slug>.json`` (the verdict, the score and the key it was graded under). Each is
written whole or not at all (``lucyshop.atomic``, fsynced), so an interrupt or a crash leaves
every finished student's files complete and no half-written one. The key is the sha256 of the
handed-in files, of the rubric (with ``--timeout``) and of the kit that checked them (its
``src``, ``spec``, ``checkpoints``, ``learner`` and ``solutions`` trees), and whether the
checkpoint ran: a rerun reuses a result only when all four are the same, so editing the rubric
or the kit regrades everyone, and fixing one hand-in regrades that one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lucyshop.atomic import write_text
from lucyshop.lab.grade import feedback
from lucyshop.lab.grade.gradescope import results
from lucyshop.lab.grade.rubric import Rubric, Score
from lucyshop.lab.grade.submissions import Submission
from lucyshop.lab.grade.verdict import Verdict
from lucyshop.lab.loader import ROOT
from lucyshop.lab.statuses import VerdictStatus

SCHEMA = "lucyshop-grade-result/1"
KIT = ("pyproject.toml", "src/lucyshop", "spec", "checkpoints", "learner", "solutions")
PROOF = Path("src/lucyshop/proof")  # the kit's proof of itself decides no grade: not hashed
NOT_KEPT = (VerdictStatus.STOPPED,)  # the check was ended by Ctrl-C: no verdict at all
# The grader's own failure, not the student's: kept for the gradebook, graded again on a rerun.
# (A result kept under a status word the kit no longer has, such as the old JUDGE ERROR, does
# not load at all, so it is graded again too.)
REGRADED = (VerdictStatus.CHECK_ERROR,)


@dataclass
class Graded:
    submission: Submission
    verdict: Verdict
    similarity: float | None
    score: Score  # its lines when graded by this run; only the total when kept from an earlier
    flagged: bool
    reused: bool = False  # kept from an earlier run, not graded by this one


@cache
def kit_version(root: Path = ROOT) -> str:
    """sha256 of the kit's code, tests and reference (names and bytes; caches left out)."""
    digest = hashlib.sha256()
    for top in KIT:
        base = root / top
        files = [base] if base.is_file() else sorted(base.rglob("*"))
        for path in files:
            relative = path.relative_to(root)
            if (
                not path.is_file()
                or relative.is_relative_to(PROOF)
                or any(p.startswith(".") or p == "__pycache__" for p in relative.parts)
            ):
                continue
            digest.update(relative.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def files_digest(submission: Submission) -> str:
    """sha256 of what the student handed in: the chapter file, the exercises and exercise 7's
    file, if any."""
    digest = hashlib.sha256()
    for name, path in (
        ("chapter", submission.chapter),
        ("exercises", submission.exercises),
        ("postgres", submission.postgres),
    ):
        digest.update(name.encode() + b"\0")
        if path is not None and path.is_file():
            digest.update(path.read_bytes())
        digest.update(b"\0")
    digest.update(submission.problem.encode())
    return digest.hexdigest()


def key(submission: Submission, rubric: Rubric, checkpoint: bool) -> dict[str, str]:
    return {
        "files": files_digest(submission),
        "rubric": rubric.digest,
        "kit": kit_version(),
        "checkpoint": "yes" if checkpoint else "no",
    }


def result_path(out: Path, submission: Submission) -> Path:
    return out / "results" / f"{submission.slug}.json"


def keep(out: Path, graded: Graded, rubric: Rubric, graded_under: dict[str, str]) -> bool:
    """Write the student's feedback, results.json and result; False when it is not kept."""
    if graded.verdict.status in NOT_KEPT:
        return False
    shown = graded.submission.shown  # a file name never carries a control character
    _write(out / "feedback" / f"{shown}.txt", feedback.text(graded.verdict, graded.score))
    document = results.document(
        graded.verdict, rubric, scored=graded.score, similarity=graded.similarity
    )
    _write(out / "gradescope" / shown / "results.json", _json(document))
    record = {
        "schema": SCHEMA,
        "student": graded.submission.student,
        "key": graded_under,
        "verdict": dataclasses.asdict(graded.verdict),
        "similarity": graded.similarity,
        "score": graded.score.points,
        "flagged": graded.flagged,
    }
    _write(result_path(out, graded.submission), _json(record))  # last: the others are whole
    return True


def kept(out: Path, submission: Submission, graded_under: dict[str, str] | None) -> Graded | None:
    """The result kept for ``submission`` under the same key (any key when None), or None."""
    path = result_path(out, submission)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("schema") != SCHEMA or record.get("student") != submission.student:
            return None
        verdict = Verdict.from_dict(record["verdict"])
        if graded_under is not None and (
            record.get("key") != graded_under or verdict.status in REGRADED
        ):
            return None
        return Graded(
            submission,
            verdict,
            record["similarity"],
            Score(record["score"]),
            record["flagged"],
            True,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _json(document: dict) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text, durable=True)
