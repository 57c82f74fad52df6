"""A class's hand-ins: find them in a directory, and stage each one alone.

A submission is ``DIR/<student>/ch13_leases.py`` (with an optional ``exercises.py`` and an
optional ``ch13_postgres.py``, exercise 7, beside it) or ``DIR/<student>.py``. Anything else in
``DIR`` that looks like a hand-in (a directory without the chapter file) is still a
submission, with a problem that says what is missing, so it gets its own row instead of
vanishing from the gradebook.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from lucyshop.lab.check.results import printable
from lucyshop.lab.loader import CHAPTER, EXERCISES, IMPLEMENTATIONS, PG_FILE

STARTER_EXERCISES = IMPLEMENTATIONS["learner"].with_name(EXERCISES)
STARTER_POSTGRES = IMPLEMENTATIONS["learner"].with_name(PG_FILE)
REFUSED = "refused: "  # how a refused hand-in's problem begins


@dataclass(frozen=True)
class Submission:
    """One student's hand-in, as found; ``problem`` says which file is missing, if one is."""

    student: str
    chapter: Path | None
    exercises: Path | None = None
    problem: str = ""
    postgres: Path | None = None  # exercise 7's ch13_postgres.py, when handed in

    @property
    def slug(self) -> str:
        return slug(self.student)

    @property
    def shown(self) -> str:
        """The student's name as printed and in file names: control characters escaped."""
        return printable(self.student)

    @property
    def refused(self) -> bool:
        """A link or a special file where the hand-in or one of its files would be."""
        return self.problem.startswith(REFUSED)


def slug(student: str) -> str:
    """A file-name-safe, unique name for ``student`` (spaces, unicode, dots all allowed in)."""
    ascii_name = unicodedata.normalize("NFKD", student).encode("ascii", "ignore").decode()
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", ascii_name).strip("-")[:40] or "student"
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{safe}-{digest}"


def find(directory: Path) -> list[Submission]:
    """Every hand-in under ``directory``, sorted by student name. A link or a special file
    (a FIFO, a device) where a hand-in or one of its files would be is refused: its row
    says so (``problem``, ``refused``) and nothing is read through it."""
    if not directory.is_dir():
        raise ValueError(f"no submissions directory at {directory}")
    found = []
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        mode = entry.lstat().st_mode
        name = entry.stem if entry.suffix == ".py" else entry.name
        if why := _not_plain(mode):
            found.append(Submission(name, None, problem=f"{REFUSED}{entry.name} is {why}"))
        elif stat.S_ISDIR(mode):
            found.append(_from_directory(entry))
        elif entry.suffix == ".py":
            found.append(Submission(entry.stem, entry))
    return found


def _not_plain(mode: int) -> str:
    """What makes an entry of this ``lstat`` mode no hand-in to read ("" for a directory or a
    regular file): the grader, which may run as root, never follows a name a student chose."""
    if stat.S_ISLNK(mode):
        return "a symbolic link (a hand-in is a folder or a .py file, never a link)"
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        return "a special file (a FIFO, a socket or a device), not a hand-in"
    return ""


def _own_file(path: Path) -> tuple[Path | None, str]:
    """``(path, "")`` for a regular file, ``(None, "")`` when there is none, and ``(None,
    why)`` for a link or a special file in its place."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None, ""
    why = _not_plain(mode) or ("a directory" if stat.S_ISDIR(mode) else "")
    return (None, why) if why else (path, "")


def _from_directory(entry: Path) -> Submission:
    owned = {name: _own_file(entry / name) for name in (CHAPTER, EXERCISES, PG_FILE)}
    refused = [f"{entry.name}/{name} is {why}" for name, (_p, why) in owned.items() if why]
    if refused:
        return Submission(entry.name, None, problem=f"{REFUSED}{'; '.join(refused)}")
    chapter, extra, pg = (owned[name][0] for name in (CHAPTER, EXERCISES, PG_FILE))
    if chapter is not None:
        return Submission(entry.name, chapter, extra, postgres=pg)
    others = sorted(p.name for p in entry.iterdir())[:5]
    seen = f" (it holds: {', '.join(others)})" if others else " (it is empty)"
    return Submission(entry.name, None, extra, f"no {CHAPTER} in {entry.name}/{seen}", pg)


def stage(submission: Submission, directory: Path) -> Path:
    """Copy the hand-in into ``directory`` as ``ch13_leases.py``, ``exercises.py`` and
    ``ch13_postgres.py``.

    The judge then reads a copy the grader owns, under the name the kit expects, whatever the
    student called their file; the original is never touched. Without an ``exercises.py`` (or
    a ``ch13_postgres.py``) the starter stubs go beside it: the check runs none of their tests
    (each row is NOT STARTED at once, instead of every test failing on the missing file), and
    the grader marks the rows NOT SUBMITTED.
    """
    if submission.chapter is None:
        raise ValueError(f"nothing to stage: {submission.problem}")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / CHAPTER
    shutil.copyfile(submission.chapter, target)
    shutil.copyfile(submission.exercises or STARTER_EXERCISES, directory / EXERCISES)
    shutil.copyfile(submission.postgres or STARTER_POSTGRES, directory / PG_FILE)
    return target
