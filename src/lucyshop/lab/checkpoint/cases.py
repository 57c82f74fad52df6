"""The checkpoints' cases, stated once: their numbers, names, tags and holder modes, in order;
and what the judge says of one case (``Case``).

Everything else reads them from here: both checkpoints (``checkpoints/ch13_worker_recovery.py``
defines one function per case, named after it, whose docstring says what the case proves;
``checkpoints/ch13_postgres_recovery.py`` the same for the cases ``ON_POSTGRES`` lists), the
runner, the judge, the rubric's count of cases, the demo, the lesson and the tests.

A leaf: what only reads a case (the rubric, the gradebook, the check's JSON) loads neither the
judge nor the runner, and the trusted side reaches nothing that runs inside the sandbox. The
holders there read their ``Mode`` from the leaf this module reads it from
(``lucyshop.lab.services.holder_modes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from lucyshop.lab.services.holder_modes import Mode


class CaseId(NamedTuple):
    """One case: its number (``--case N``, the ``caseN`` directory), its name (the output's and
    the evidence's), its tag (its events' label in the evidence's timeline, its work's key in
    the shop), for a case with a worker child what that holder does (``Mode``), and whether the
    chapter's checkpoint runs it (``False``: the kit's own case, beyond the book)."""

    number: int
    name: str
    tag: str
    holder: Mode | None
    in_book: bool

    @property
    def function(self) -> str:
        """The checkpoint function that runs this case: its name, words joined by ``_``."""
        return self.name.replace(" ", "_")

    @property
    def title(self) -> str:
        """The case as its printed line names it: number, name and, for the kit's own case,
        that the book does not run it."""
        return f"{self.number} {self.name}" + ("" if self.in_book else f" ({BEYOND})")


BEYOND = "beyond the book"


@dataclass
class Case:
    """One case as the judge read it from the files it kept: its number and name, whether it
    passed, and why (or what confirmed it)."""

    case: int
    name: str
    passed: bool
    message: str


# The chapter's checkpoint runs the first four; the paused holder, the crash after the
# supplier committed (the chapter leaves it to the finished agent's service test) and the
# operator's cancel (its exercise 2) are the kit's own.
CASES = tuple(
    CaseId(number, name, tag, holder, in_book)
    for number, (name, tag, holder, in_book) in enumerate(
        (
            ("arithmetic", "arithmetic", None, True),
            ("fence", "fence", None, True),
            ("killed holder", "killed", Mode.KILLED, True),
            ("live stale holder", "live", Mode.LIVE, True),
            ("paused holder", "paused", Mode.PAUSED, False),
            ("crash after remote acceptance", "post-commit", Mode.SENDING, False),
            ("cancel", "cancel", Mode.CANCEL, False),
        )
    )
)
ARITHMETIC, FENCE, KILLED, LIVE_STALE, PAUSED, POST_COMMIT, CANCEL = CASES  # CASES[n].number == n
HELD = tuple(case for case in CASES if case.holder is not None)  # the cases with a worker child
ON_POSTGRES = (KILLED, LIVE_STALE)  # the cases exercise 7's checkpoint runs on PostgreSQL
