"""The process-kill checkpoint's cases, stated once: their numbers and names, in order.

Everything else reads them from here: the checkpoint (``checkpoints/ch13_worker_recovery.py``
defines one function per case, named after it, whose docstring says what the case proves),
the judge, the rubric's count of cases, the demo, and the tests.
``tests/test_checkpoint.py::test_the_case_list_is_stated_once`` fails if another file states
the list, a case's name, or the count again.
"""

from __future__ import annotations

from typing import NamedTuple


class CaseId(NamedTuple):
    """One case: its number (``--case N``, the ``caseN`` directory) and its name (the output's
    and the evidence's)."""

    number: int
    name: str

    @property
    def function(self) -> str:
        """The checkpoint function that runs this case: its name, words joined by ``_``."""
        return self.name.replace(" ", "_")


CASES = tuple(
    CaseId(number, name)
    for number, name in enumerate(
        (
            "arithmetic",
            "fence",
            "killed holder",
            "live stale holder",
            "paused holder",
            "crash after remote acceptance",
            "cancel",
        )
    )
)
ARITHMETIC, FENCE, KILLED, LIVE_STALE, PAUSED, POST_COMMIT, CANCEL = CASES  # CASES[n].number == n
