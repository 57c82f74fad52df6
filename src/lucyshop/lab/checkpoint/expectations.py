"""What the checkpoints' cases expect: a failed expectation that says what differs, the stale
writes a holder must have had refused, and the records a worker child leaves for its parent.

Shared by both checkpoints (``checkpoints/ch13_worker_recovery.py`` and
``checkpoints/ch13_postgres_recovery.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import ReferenceBlocked
from lucyshop.lab.services.processes import wait_for_file


class ExpectationFailed(AssertionError):
    def __init__(self, expectation: str, expected: Any, seen: Any) -> None:
        self.expectation, self.expected, self.seen = expectation, expected, seen
        super().__init__(f"{expectation}: {self.difference()}")

    def difference(self) -> str:
        """What differs: for two dicts, each differing field by name (``generation expected 2,
        saw 1``), else the two values whole."""
        expected, seen = self.expected, self.seen
        if isinstance(expected, dict) and isinstance(seen, dict):
            keys = [key for key in expected if expected[key] != seen.get(key)]
            keys += [key for key in seen if key not in expected]
            return "; ".join(
                f"{key} expected {expected.get(key)!r}, saw {seen.get(key)!r}" for key in keys
            )
        return f"expected {expected!r}, saw {seen!r}"


def expect(expectation: str, seen: Any, expected: Any) -> None:
    if seen != expected:
        raise ExpectationFailed(expectation, expected, seen)


def claimed(held: Any) -> dict[str, Any] | None:
    """What a claim took, by name: which work, at which generation (None: nothing)."""
    return None if held is None else {"work_id": held.work_id, "generation": held.generation}


# Which chapter function fences each write a stale holder tries, and what that write is.
WRITES = ("completion", "supplier", "transcript")
FENCED_BY = {
    "completion": ("finish()", "completion"),
    "transcript": ("observe()", "transcript row"),
    "supplier": ("Claim.worker_id (the supplier send's holder check)", "supplier send"),
}


def expect_refused(outcomes: dict[str, str], writes: tuple[str, ...], after: str) -> None:
    """Every stale write in ``writes`` was refused; else name the function that let one in,
    and the rule it broke (what the function tests may have missed)."""
    accepted = [w for w in writes if w not in refused_at(outcomes)]
    if accepted:
        function, what = FENCED_BY[accepted[0]]
        raise ExpectationFailed(
            f"{function} accepted generation 1's {what} after {after}",
            "PermissionError",
            outcomes[accepted[0]],
        )


def refused_at(outcomes: dict[str, str]) -> list[str]:
    """The boundaries at which a write was refused with PermissionError, sorted."""
    return sorted(k for k, v in outcomes.items() if v.startswith("PermissionError"))


def child_record(
    child: Any, path: Path, timeout: float, where: str | None = None
) -> dict[str, Any]:
    """The record a worker child wrote at ``path`` (then removed), waiting at most ``timeout``
    seconds and failing at once if the child exits first. A child that found a stub or the
    blocked reference says so in its record, and it is raised here as the parent's own;
    ``where``: the student's file as the student knows it (the child sees it under another
    name, in its sandbox)."""
    record = wait_for_file(path, timeout=timeout, proc=child)
    path.unlink()
    if "not_started" in record:
        raise NotStarted(record["not_started"], record["section"], where or record["where"])
    if "reference_blocked" in record:
        raise ReferenceBlocked(record["reference_blocked"])
    return record
