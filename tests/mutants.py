"""Mutants of the reference: each removes one guard the chapter names.

Each mutant is an exact text edit of ``solutions/ch13_leases.py`` that must apply exactly
once, so a change to the reference that would silently disarm a mutant fails loudly instead.
``caught_by`` says which suite must notice: the learner tests, the checkpoint, or both.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from lucyshop.lab.checkpoint.cases import (
    ARITHMETIC,
    CANCEL,
    FENCE,
    KILLED,
    LIVE_STALE,
    PAUSED,
    CaseId,
)
from lucyshop.lab.given.stubs import functions_in

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions" / "ch13_leases.py"


@dataclass(frozen=True)
class Mutant:
    name: str
    old: str
    new: str
    checkpoint_case: CaseId | None = None  # the checkpoint case that must fail, if it must
    needs_contention: bool = False  # only the multi-process contention test can see it

    def source(self) -> str:
        text = SOLUTIONS.read_text()
        count = text.count(self.old)
        if count != 1:
            raise AssertionError(f"mutant {self.name!r}: its edit matches {count} places, not 1")
        return text.replace(self.old, self.new)

    @property
    def function(self) -> str:
        """The reference's function the edit lands in (``Class.method`` for a method): the
        function whose own tests must catch it."""
        text = SOLUTIONS.read_text()
        line = text.count("\n", 0, text.index(self.old)) + 1
        for name, node in functions_in(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.lineno <= line <= node.end_lineno:
                return name
        raise AssertionError(f"mutant {self.name!r}: its edit is in no function")

    def write(self, directory: Path) -> Path:
        path = directory / self.name / "ch13_leases.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.source())
        return path


MUTANTS = [
    Mutant("assert_current_state", '    if row["state"] != "running":\n', "    if False:\n"),
    Mutant("assert_current_identity", "    if holder != held.owner:\n", "    if False:\n"),
    Mutant(
        "assert_current_generation",
        '    if row["generation"] != held.generation:\n',
        "    if False:\n",
        checkpoint_case=FENCE,
    ),
    Mutant("assert_current_expiry", '    if row["expires"] <= now:\n', "    if False:\n"),
    Mutant(
        "claim_generation_increment",
        'row["generation"] + 1, now + ttl\n',
        'max(row["generation"], 1), now + ttl\n',
        checkpoint_case=FENCE,
    ),
    Mutant(
        "claim_session_clause",
        "                  AND NOT EXISTS (",
        "                  AND 1 OR NOT EXISTS (",
        checkpoint_case=FENCE,
    ),
    Mutant(
        "claim_expiry_clause",
        "(w.state = 'running' AND l.expires <= :now)",
        "w.state = 'running'",
        checkpoint_case=KILLED,
    ),
    Mutant(
        "observe_fence",
        "        assert_current(db, held, now)\n        cursor = db.execute(",
        "        cursor = db.execute(",
        checkpoint_case=LIVE_STALE,
    ),
    Mutant(
        "finish_fence",
        "        assert_current(db, held, now)\n"
        '        db.execute(\n            "INSERT INTO outcomes',
        '        db.execute(\n            "INSERT INTO outcomes',
        checkpoint_case=LIVE_STALE,
    ),
    Mutant(
        "worker_id_without_generation",
        'return f"{self.owner}#{self.generation}"',
        "return self.owner",
        checkpoint_case=PAUSED,
    ),
    Mutant(
        "percentile_rank_off_by_one",
        "return ordered[rank - 1]",
        "return ordered[min(rank, len(ordered) - 1)]",
        checkpoint_case=ARITHMETIC,
    ),
    Mutant(
        "false_expiry_at_or_above",
        "if turn > lease)",
        "if turn >= lease)",
        checkpoint_case=ARITHMETIC,
    ),
    Mutant(
        "percentile_rank_truncated",
        "math.ceil(q * len(ordered) / 100))",
        "int(q * len(ordered) / 100))",
    ),
    # Each statement of the claim in its own autocommit transaction: two processes can both
    # read the same item as eligible.
    Mutant(
        "claim_not_in_one_transaction",
        "    now = _clock(now)\n    with db.immediate():\n        # Oldest first",
        "    now = _clock(now)\n    if True:\n        # Oldest first",
        needs_contention=True,
    ),
    Mutant(
        "detection_scan_sign",
        "return lease - turn / 2 + scan / 2",
        "return lease - turn / 2 - scan / 2",
        checkpoint_case=ARITHMETIC,
    ),
]

MUTANTS.append(
    Mutant(
        "cancel_generation",
        '        generation = row["generation"] + 1\n',
        '        generation = row["generation"]\n',
        checkpoint_case=CANCEL,
    )
)


# The expiry instant: at now == expires the lease is over (for its holder and for a rival).
MUTANTS.append(
    Mutant("assert_current_expiry_instant", 'if row["expires"] <= now:', 'if row["expires"] < now:')
)
MUTANTS.append(Mutant("claim_expiry_instant", "AND l.expires <= :now)", "AND l.expires < :now)"))
# The holder check inside the write's transaction: a second transaction lets a takeover in between
# (the checkpoint's fence case puts a rival before each statement of both writers).
MUTANTS.append(
    Mutant(
        "observe_check_in_its_own_transaction",
        "        assert_current(db, held, now)\n        cursor = db.execute(",
        "        assert_current(db, held, now)\n    with db.immediate():\n"
        "        cursor = db.execute(",
        checkpoint_case=FENCE,
    )
)
MUTANTS.append(
    Mutant(
        "finish_check_in_its_own_transaction",
        "        assert_current(db, held, now)\n        db.execute(\n"
        '            "INSERT INTO outcomes',
        "        assert_current(db, held, now)\n    with db.immediate():\n        db.execute(\n"
        '            "INSERT INTO outcomes',
        checkpoint_case=FENCE,
    )
)

# The holder check written inline, reading state, owner label and expiry but not the
# generation: only the same owner label reclaiming at generation 2 can tell (issue 30).
INLINE_CHECK_WITHOUT_GENERATION = (
    "        row = db.execute(\n"
    '            "SELECT w.state, w.worker_id, l.expires FROM work w"\n'
    '            " JOIN assignment_leases l ON l.work_id = w.work_id WHERE w.work_id = ?",\n'
    "            (held.work_id,),\n"
    "        ).fetchone()\n"
    '        if row is None or row["state"] != "running"'
    ' or row["worker_id"].split("#")[0] != held.owner'
    ' or row["expires"] <= _clock(now):\n'
    '            raise PermissionError("not the holder")\n'
)
MUTANTS.append(
    Mutant(
        "observe_inline_check_without_generation",
        "        assert_current(db, held, now)\n        cursor = db.execute(",
        INLINE_CHECK_WITHOUT_GENERATION + "        cursor = db.execute(",
    )
)
MUTANTS.append(
    Mutant(
        "finish_inline_check_without_generation",
        "        assert_current(db, held, now)\n"
        '        db.execute(\n            "INSERT INTO outcomes',
        INLINE_CHECK_WITHOUT_GENERATION + '        db.execute(\n            "INSERT INTO outcomes',
    )
)

# The claim before issue 16: it sorts every eligible item to take the oldest, so a claim slows
# down as work piles up (the scaling test in tests/learner/test_claim.py must notice).
MUTANTS.append(
    Mutant(
        "claim_sorts_the_queue",
        "                 FROM work w INDEXED BY work_open\n"
        "                 LEFT JOIN assignment_leases l ON l.work_id = w.work_id\n"
        "                WHERE w.state != 'finished'\n"
        "                  AND (w.state = 'pending'",
        "                 FROM work w LEFT JOIN assignment_leases l ON l.work_id = w.work_id\n"
        "                WHERE (w.state = 'pending'",
    )
)

BY_NAME = {mutant.name: mutant for mutant in MUTANTS}
