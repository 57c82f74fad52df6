"""The answers to the notebooks' predictions, kept out of the cells the learner reads first.

A prediction is two cells: one where the learner writes a guess (``None`` as stored), and
``lesson.reveal("key", guess)`` after it. The reveal cell holds no answer in its source: the
answer is computed here, from the kit's measured receipts, the reference's recorded checkpoint
run, or the rule the section teaches, and it is printed only beside a guess. Each answer says
where it comes from (``source``), so a measured figure is never passed off as a computed one.

Every measured answer is read from its receipt when the cell runs: re-measuring a receipt
changes the answer, never leaves it stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lucyshop.lab.checkpoint.cases import KILLED, POST_COMMIT
from lucyshop.lab.loader import ROOT

EVIDENCE = ROOT / "evidence"
STORED = ROOT / "notebooks" / "stored"


@dataclass(frozen=True)
class Answer:
    """One prediction's question label, its answer (computed on demand) and its source."""

    what: Callable[[], str]  # the label, printed with or without a guess: it holds no answer
    value: Callable[[], float]
    source: str = "measured"
    unit: str = ""


@cache
def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def leases() -> dict[str, Any]:
    """The kit's Part A receipt (``evidence/ch13-leases-receipt.json``)."""
    return _json(EVIDENCE / "ch13-leases-receipt.json")


def _pilot() -> list[float]:
    return [turn["seconds"] for turn in leases()["observations"]["pilot"]]


def _beyond(turns: list[float], lease: float) -> int:
    return sum(turn > lease for turn in turns)


def _figure(*path: str) -> Any:
    value: Any = leases()["figures"]
    for key in path:
        value = value[key]
    return value


def _trials(rule: str) -> int:
    return _figure("false_expiry", rule, "trials")


def _reference() -> dict[str, Any]:
    """The reference's recorded checkpoint run (``notebooks/stored``)."""
    return _json(STORED / "checkpoint_reference.json")


def _event(case: str, event: str) -> dict[str, Any]:
    timeline = _reference()["timeline"]
    return next(e for e in timeline if e.get("case") == case and e.get("event") == event)


def _reference_case(name: str) -> dict[str, Any]:
    return _reference()["cases"][name]


def _kill_to_done() -> float:
    at = {e["event"]: e["t"] for e in _reference()["timeline"] if e.get("case") == KILLED.tag}
    return at["replacement finished"] - at["holder exited"]


def _skew() -> dict[str, Any]:
    return _json(EVIDENCE / "ch13-skew-receipt.json")


def _taker_ahead_live() -> dict[str, Any]:
    """The skew receipt's row of live SQLite holders whose taker's clock ran 2 leases ahead."""
    from lucyshop.lab.lesson.story import skew_rows

    return skew_rows(_skew())["sqlite", "fenced", 2.0, "taker", "live"]


def _exercise(n: int) -> dict[str, Any]:
    name = {5: "ch13-exercise5-renewal-receipt.json", 6: "ch13-exercise6-records-receipt.json"}
    return _json(EVIDENCE / name[n])


def _step_share(lease: float = 2.0, step: float = 1.0, n: int = 1000) -> float:
    """Live leases claimed evenly over the last ``lease`` seconds: the share with at most
    ``step`` seconds left, which a forward step of the server's clock ends at once."""
    left = [lease - lease * i / n for i in range(n)]
    return sum(s <= step for s in left) / n


def _const(value: float) -> Callable[[], float]:
    return lambda: value


def _label(text: str) -> Callable[[], str]:
    return lambda: text


ANSWERS: dict[str, Answer] = {
    # ---------------------------------------------------------------- 13a, from the receipt
    "none_cut_off_of_20": Answer(
        _label("chance that none of 20 turns outlives a lease that one turn in ten outlives"),
        _const(0.9**20),  # each turn survives with 0.9, independently: the chapter's arithmetic
        source="computed",
    ),
    "longer_than_twice_the_median": Answer(
        lambda: f"pilot turns longer than twice the median, of {len(_pilot())}",
        lambda: _beyond(_pilot(), 2 * _figure("pilot", "p50")),
    ),
    "median_false_expiries": Answer(
        lambda: f"false expiries under the median lease, of {_trials('median')}",
        lambda: _figure("false_expiry", "median", "false_expiries"),
    ),
    "rank_of_the_5_percent_lease_of_10": Answer(
        _label("rank, from the shortest, of the 0.05 lease among 10 turns"),
        # one turn past it is already 1 in 10, above 0.05: only the slowest turn qualifies
        _const(10),
        source="the rule",
    ),
    "p90_false_expiries": Answer(
        lambda: f"false expiries under the p90 lease, of {_trials('p90')}",
        lambda: _figure("false_expiry", "p90", "false_expiries"),
    ),
    "extra_wait_under_the_safe_lease": Answer(
        _label("how much longer a crash waited under the safe lease than the p90 one, mean"),
        # lease - D/2 + s/2 at two leases, same D and s: the difference is the leases'
        lambda: (
            _figure("detection", "measured_mean_delay")
            - _figure("detection_short", "measured_mean_delay")
        ),
        unit=" s",
    ),
    "shortest_wait_under_the_safe_lease": Answer(
        _label("shortest crash-to-takeover wait under the safe lease"),
        # a crash at the very end of a typical turn, seen by a scan at once: lease - D
        lambda: _figure("detection", "lease") - _figure("pilot", "p50"),
        source="computed",
        unit=" s",
    ),
    "lease_for_the_longest_allowed_turn": Answer(
        _label("shortest lease that covers the longest turn the loop allows, before margin"),
        _const(3 * 1.2 + 1.5),  # every model call at its bound, then a send that times out
        source="computed",
        unit=" s",
    ),
    "completions_a_label_fence_accepts": Answer(
        _label("completions a fence on the owner label alone accepts, of 4"),
        _const(4),  # every holder calls itself lucy-worker: a label check alone passes all four
        source="the rule",
    ),
    "placed_again": Answer(
        lambda: (
            f"{next(iter(_figure('recovery')))}: placed again, of "
            f"{next(iter(_figure('recovery').values()))['samples']}"
        ),
        lambda: next(iter(_figure("recovery").values()))["placed_again"],
    ),
    # ---------------------------------------------------------------- 13b
    "claims_that_get_work": Answer(
        _label("claims that get work"),
        _const(2),  # one running turn per conversation: till-1's second turn waits
        source="the rule",
    ),
    "generation_after_the_migration": Answer(
        _label("generation of the claim after the migration"),
        # the migration gives the old lease row generation 1; a claim writes the one after it
        _const(1 + 1),
        source="the rule",
    ),
    "comparisons_the_old_claim_fails": Answer(
        _label("comparisons the old claim fails, of 4"),
        # the chapter's four: the work is running (yes); the work row's worker id is
        # lucy-worker#2, not #1 (no); the lease's generation is 2, not 1 (no); the lease, the
        # new claim's, has not expired (yes)
        _const(sum(not ok for ok in (True, False, False, True))),
        source="the rule",
    ),
    "comparisons_refusing_the_slow_holder": Answer(
        _label("comparisons refusing the slow holder's claim, of 4"),
        # the replacement finished: the work is finished (no); the work row names generation
        # 2 (no); the lease is at generation 2 (no); the replacement's 30 s lease is live (yes)
        _const(sum(not ok for ok in (False, False, False, True))),
        source="the rule",
    ),
    "stale_rows_of_a_split_check": Answer(
        _label("moments, of 3, at which a stale generation-1 row lands"),
        # before the check: refused; between check and insert: lands under generation 2;
        # after the insert: written while generation 1 still held the work, not stale
        _const(1),
        source="the rule",
    ),
    "second_turn_if_finish_left_running": Answer(
        _label("the next claim gets the session's second turn (1 yes, 0 no)"),
        # the first turn stays running under the replacement's live lease: the session rule
        # skips the whole session
        _const(0),
        source="the rule",
    ),
    "fenced_writes_in_a_turn": Answer(
        _label("fenced writes in one turn"),
        _const(3),  # observe the tool result, observe the reply, finish
        source="the rule",
    ),
    "comparisons_refusing_the_quote": Answer(
        _label("comparisons refusing the quote, of 4"),
        # the current writer's claim, compared with its own row: every comparison holds
        _const(0),
        source="the rule",
    ),
    "kill_to_done": Answer(
        _label("kill to DONE (the reference's recorded run)"),
        _kill_to_done,
        unit=" s",
    ),
    "ledger_after_post_commit_crash": Answer(
        _label("orders in the supplier's ledger after the recovery"),
        lambda: _reference_case(POST_COMMIT.name)["ledger_count"],
        source="the reference's run",
    ),
    "cents_reserved_while_unknown": Answer(
        _label("cents kept reserved while the outcome is UNKNOWN, of 900"),
        _const(900),  # nobody knows whether the supplier accepted: all of it stays reserved
        source="the rule",
    ),
    "comparisons_refusing_the_cancelled_holder": Answer(
        _label("comparisons refusing the cancelled holder's claim, of 4"),
        # after cancel: the work is finished (not running); the work row names the operator's
        # label, not the holder's; the lease is at generation 2, not 1; the lease ended at the
        # cancel's moment, so it has expired by any later now. All four refuse.
        _const(sum(not ok for ok in (False, False, False, False))),
        source="the rule",
    ),
    "cents_reserved_after_recovery": Answer(
        _label("cents still reserved after the recovery"),
        lambda: _reference_case(KILLED.name)["reserved_cents"][-1],  # [before, after]
        source="the reference's run",
    ),
    "resume_gives_back": Answer(
        _label("things a resumed session gets back, of 4"),
        # the chapter: history and the model come back; bypass mode and background Bash do not
        _const(2),
        source="the chapter",
    ),
    # ---------------------------------------------------------------- 13c
    "late_writes_refused_before_the_reclaim": Answer(
        _label("of its transcript write and completion, refused"),
        # nobody holds it anew, but the expiry comparison fails: the lease ran out
        _const(2),
        source="the rule",
    ),
    "orders_after_cancel_and_lookup": Answer(
        _label("orders in the supplier's ledger"),
        _const(1),  # the accepted one: a lookup discovers it, and places nothing
        source="the rule",
    ),
    "stale_rows_without_the_fence": Answer(
        _label("stale transcript rows kept without the fence"),
        _const(1),  # finish is fenced, observe is not: the stale row stays
        source="the rule",
    ),
    "approved_with_a_split_ceiling_check": Answer(
        _label("orders approved in the worst timing, of 2"),
        # both read the account before either reserves: each sees room for itself alone
        _const(2),
        source="the rule",
    ),
    "renewed_false_expiries": Answer(
        lambda: (
            "false expiries with renewal, of "
            f"{_exercise(5)['figures']['false_expiry']['renewed']['trials']}"
        ),
        lambda: _exercise(5)["figures"]["false_expiry"]["renewed"]["false_expiries"],
        source="the kit's receipt",
    ),
    "unbounded_renewer_taken_over": Answer(
        _label("hung turn, unbounded renewer, taken over (1 yes, 0 no)"),
        lambda: int(_exercise(5)["figures"]["hung"]["unbounded"]["taken_over_within_window"]),
        source="the kit's receipt",
    ),
    "placed_again_with_records": Answer(
        lambda: (
            "placed again with the records in the message, of "
            f"{next(iter(_exercise(6)['figures']['models'].values()))['records']['samples']}"
        ),
        lambda: next(iter(_exercise(6)["figures"]["models"].values()))["records"]["placed_again"],
        source="the kit's receipt",
    ),
    # ---------------------------------------------------------------- 13d
    "skip_locked_second_turn": Answer(
        _label("worker B gets the session's second turn (1 yes, 0 no)"),
        # the first turn, locked and uncommitted, is still the session's oldest unfinished one
        _const(0),
        source="the rule",
    ),
    "comparisons_refusing_the_first_pg_worker": Answer(
        _label("comparisons refusing the generation-1 claim, of 4"),
        # the work is running (yes); the owner is 'behind', not 'lucy-worker' (no); the
        # generation is 2, not 1 (no); the lease of 'behind' is live (yes)
        _const(sum(not ok for ok in (True, False, False, True))),
        source="the rule",
    ),
    "sqlite_false_takeovers": Answer(
        lambda: (
            "SQLite, taker 2 leases ahead: share of live holders that lost their work, of "
            f"{_taker_ahead_live()['trials']} trials"
        ),
        lambda: _taker_ahead_live()["false_takeover"] / _taker_ahead_live()["trials"],
    ),
    "slow_clock_refuses_itself": Answer(
        _label("the slow worker's own clock refuses its write (1 yes, 0 no)"),
        _const(0),  # by its clock, 599 s are left
        source="the rule",
    ),
    "ahead_worker_crash_taken_within_a_minute": Answer(
        _label("its work taken over within a minute (1 yes, 0 no)"),
        # its expires is its own clock + 30 s: 600 + 30 s past everyone else's now
        _const(0),
        source="the rule",
    ),
    "share_ended_by_a_clock_step": Answer(
        _label("share of live leases ended by the step"),
        _step_share,
        source="computed",
    ),
}
