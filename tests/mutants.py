"""Mutants of the reference: each removes one guard the chapter (or the kit) teaches.

Each mutant is an exact text edit of ``solutions/ch13_leases.py`` that must apply exactly
once, so a change to the reference that would silently disarm a mutant fails loudly instead.
The learner tests of the function the edit lands in must catch it (``module`` names another
test module where the guard is beyond the book); ``checkpoint_case`` names the checkpoint case
that must fail too, if one must.
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
    module: str | None = None  # the learner test module that must catch it, if not its function's

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


# The statements of observe and finish that follow their holder check.
OBSERVE_INSERT = '        connection.execute(\n            "INSERT INTO transcript'
FINISH_MOVE = "        connection.execute(\"UPDATE work SET state = 'finished'"
CHECK = "        assert_current(connection, held)\n"
# The holder check written inline, reading state, owner label and expiry but not the
# generation: only the same owner label reclaiming at generation 2 can tell (issue 30).
INLINE_CHECK_WITHOUT_GENERATION = (
    "        row = connection.execute(\n"
    '            "SELECT w.state, w.worker_id, l.expires FROM work w"\n'
    '            " JOIN assignment_leases l ON l.work_id = w.work_id WHERE w.work_id = ?",\n'
    "            (held.work_id,),\n"
    "        ).fetchone()\n"
    '        if row is None or row[0] != "running"'
    ' or row[1].split("#")[0] != held.owner'
    " or row[2] <= time.time():\n"
    '            raise PermissionError("not the holder")\n'
)
BOOK_REFUSAL = (
    '    if not owner or "#" in owner or not math.isfinite(ttl) or not 0 < ttl <= 3600:\n'
)

MUTANTS = [
    # assert_current: each of its comparisons, each enough on its own to refuse.
    Mutant("assert_current_state", '    if state != "running":\n', "    if False:\n"),
    Mutant("assert_current_identity", "    if worker_id != held.worker_id:\n", "    if False:\n"),
    # Without it, the worker id (owner#generation) still refuses every stale claim the
    # checkpoint makes; only a lease row whose generation alone moved on tells.
    Mutant(
        "assert_current_generation", "    if generation != held.generation:\n", "    if False:\n"
    ),
    Mutant("assert_current_expiry", "    if expires <= now:\n", "    if False:\n"),
    # The expiry instant: at now == expires the lease is over (for its holder and for a rival).
    Mutant("assert_current_expiry_instant", "    if expires <= now:\n", "    if expires < now:\n"),
    # claim: one transaction, the generation increment, the expired-lease eligibility and the
    # session serialisation. (Making live running work eligible too is no defect of the
    # book's query: its session clause, which does not skip the item itself, keeps a live
    # holder's own item out.)
    Mutant(
        "claim_generation_increment",
        "before + 1, now + ttl)",
        "max(before, 1), now + ttl)",
        checkpoint_case=FENCE,
    ),
    Mutant(
        "claim_session_clause",
        "WHERE o.session_id = w.session_id",
        "WHERE 0",
        checkpoint_case=FENCE,
    ),
    Mutant(
        "claim_never_takes_over_expired",
        "(w.state = 'running' AND l.expires <= :now)",
        "0",
        checkpoint_case=KILLED,
    ),
    Mutant("claim_expiry_instant", "AND l.expires <= :now)", "AND l.expires < :now)"),
    # Each statement of the claim in its own autocommit transaction: two processes can both
    # read the same item as eligible.
    Mutant(
        "claim_not_in_one_transaction",
        "    with db.immediate() as connection:\n        # The open work in age order",
        "    connection = db.connection\n    if True:\n        # The open work in age order",
        needs_contention=True,
    ),
    Mutant(
        "claim_without_refusals",
        "    _refuse_hostile(owner, ttl, now)\n    now = time.time() if now is None else now\n"
        + BOOK_REFUSAL,
        "    now = time.time() if now is None else now\n    if False:\n",
    ),
    # Beyond the book: the claim's refusal of hostile input, and its walk of the work_open
    # index instead of the book's sorting query (the scaling test must notice).
    Mutant(
        "claim_accepts_hostile_input",
        "    _refuse_hostile(owner, ttl, now)\n",
        "",
        module="test_claim_beyond_the_book",
    ),
    Mutant(
        "claim_sorts_the_queue",
        '            " FROM work w INDEXED BY work_open"\n'
        '            " LEFT JOIN assignment_leases l ON l.work_id = w.work_id"\n'
        "            \" WHERE w.state != 'finished'\"\n"
        "            \" AND (w.state = 'pending'",
        '            " FROM work w LEFT JOIN assignment_leases l ON l.work_id = w.work_id"\n'
        "            \" WHERE (w.state = 'pending'",
        module="test_claim_beyond_the_book",
    ),
    # observe and finish: the holder check, inside the write's own transaction.
    Mutant("observe_fence", CHECK + OBSERVE_INSERT, OBSERVE_INSERT, checkpoint_case=LIVE_STALE),
    Mutant("finish_fence", CHECK + FINISH_MOVE, FINISH_MOVE, checkpoint_case=LIVE_STALE),
    # The holder check inside the write's transaction: a second transaction lets a takeover in
    # between (the checkpoint's fence case puts a rival before each statement of both writers).
    Mutant(
        "observe_check_in_its_own_transaction",
        CHECK + OBSERVE_INSERT,
        CHECK + "    with db.immediate() as connection:\n" + OBSERVE_INSERT,
        checkpoint_case=FENCE,
    ),
    Mutant(
        "finish_check_in_its_own_transaction",
        CHECK + FINISH_MOVE,
        CHECK + "    with db.immediate() as connection:\n" + FINISH_MOVE,
        checkpoint_case=FENCE,
    ),
    Mutant(
        "observe_inline_check_without_generation",
        CHECK + OBSERVE_INSERT,
        INLINE_CHECK_WITHOUT_GENERATION + OBSERVE_INSERT,
    ),
    Mutant(
        "finish_inline_check_without_generation",
        CHECK + FINISH_MOVE,
        INLINE_CHECK_WITHOUT_GENERATION + FINISH_MOVE,
    ),
    Mutant(
        "observe_allows_nan",
        "json.dumps(message, allow_nan=False)",
        "json.dumps(message)",
    ),
    Mutant("finish_any_status", "    if status not in STATUSES:\n", "    if False:\n"),
    Mutant(
        "finish_leaves_the_work_running",
        FINISH_MOVE + ' WHERE work_id = ?", (held.work_id,))\n',
        "",
    ),
    # recover_once: only recorded approvals, DONE only on conclusive receipts.
    Mutant(
        "recover_once_done_without_conclusive_receipts",
        "        if all(answer in CONCLUSIVE for answer in answers):\n",
        "        if True:\n",
    ),
    Mutant(
        "recover_once_rejected_is_not_conclusive",
        "if all(answer in CONCLUSIVE for answer in answers)",
        'if all(answer == "ACCEPTED" for answer in answers)',
    ),
    Mutant(
        "recover_once_continues_drafts",
        "AND status IN ('APPROVED', 'SENDING', 'UNKNOWN')",
        "AND status IN ('DRAFT', 'APPROVED', 'SENDING', 'UNKNOWN')",
    ),
    # The ready-made parts: their rows stay, so that a learner who breaks them is told.
    Mutant(
        "worker_id_without_generation",
        'return f"{self.owner}#{self.generation}"',
        "return self.owner",
        checkpoint_case=PAUSED,
    ),
    Mutant(
        "enqueue_refuses_a_retried_delivery",
        'not in {"accepted", "duplicate"}',
        'not in {"accepted"}',
    ),
    # Part A.
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
    Mutant(
        "detection_scan_sign",
        "return lease - turn / 2 + scan / 2",
        "return lease - turn / 2 - scan / 2",
        checkpoint_case=ARITHMETIC,
    ),
    # The kit's own cancel: the generation it takes fences the holder.
    Mutant(
        "cancel_generation",
        '        generation = row["generation"] + 1\n',
        '        generation = row["generation"]\n',
        checkpoint_case=CANCEL,
    ),
]

BY_NAME = {mutant.name: mutant for mutant in MUTANTS}
