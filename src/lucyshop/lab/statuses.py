"""The lab's status words, each defined once: ``make check``'s rows and checkpoint (and the
checkpoint child's word for each case), ``make grade``'s verdicts, and the mark of a printed
result line with the one formatter of that line (``result_line``). A ``StrEnum`` member *is*
its word (``Status.PASSING == "PASSING"``), so the JSON, the printed table and the gradebook
keep the same words. Whatever passed, a row, a case, the checkpoint or a printed check, says
``PASSING``, and whatever failed ``FAILING``: one word each, as a passing run is the book's.

``schemas/check.json`` lists the same words for the ``ch13-check/2`` contract; a test holds the
two equal.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """One row of ``make check``'s table: a chapter function or an exercise."""

    NOT_STARTED = "NOT STARTED"  # still the stub, read from the file's syntax
    FAILING = "FAILING"
    PASSING = "PASSING"
    LEFT_OUT = "LEFT OUT"  # exercises 5 and 6 under --no-measured; exercise 7 without PostgreSQL
    NOT_SUBMITTED = "NOT SUBMITTED"  # make grade only: its file was not handed in


class CheckpointStatus(StrEnum):
    """The checkpoint, as the judge reads it from the files it kept."""

    PASSING = "PASSING"
    FAILING = "FAILING"
    NOT_STARTED = "NOT STARTED"  # the file is not ready for it: it stopped at a stub
    SKIPPED = "SKIPPED"  # not run: --no-checkpoint, or the kit has no checkpoint


class CaseResult(StrEnum):
    """What the checkpoint's child records for one case in its evidence. The judge believes
    only PASSING, and only when the files the case kept agree."""

    STARTED = "STARTED"  # running; still so when the child ended inside the case
    PASSING = "PASSING"
    FAILING = "FAILING"
    NOT_STARTED = "NOT STARTED"  # it stopped at a stub


class Mark(StrEnum):
    """The word a printed result line starts with (``result_line``): the same two words."""

    PASS = "PASSING"
    FAIL = "FAILING"
    NOT_STARTED = "NOT STARTED"
    OK = "ok"  # a receipt's figure that was recomputed and agrees


def result_line(mark: Mark, subject: str, detail: str | None = None) -> str:
    """One printed result: ``FAILING  1 fence: why``. The mark, padded so that PASSING, FAILING
    and ok line up, two spaces, what it is about and, after a colon, the detail. Every checkpoint
    case, soak invariant, receipt check and exercise check prints its result through here."""
    line = f"{mark:<7}  {subject}"
    return line if detail is None else f"{line}: {detail}"


class VerdictStatus(StrEnum):
    """Whether ``make grade`` could check one hand-in at all (``lab.grade.verdict``)."""

    CHECKED = "CHECKED"  # the check ran to its end: its rows and checkpoint are the grade
    CANNOT_CHECK = "CANNOT CHECK"  # no such file, a syntax error, an import that fails
    TIMED_OUT = "TIMED OUT"
    STOPPED = "STOPPED"  # the grader was interrupted
    CHECK_ERROR = "CHECK ERROR"  # the grader's fault: no result, or one that breaks the schema
    NO_FILE = "NO FILE"
    EMPTY = "EMPTY"
