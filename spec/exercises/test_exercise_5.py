"""Exercise 5, renew the lease: a quick real run weighed by what the trusted side saw of its
leases (``renew`` and ``keep_renewing`` on their own: ``test_exercise_5_renew.py``, the same row).

The quick run (scripted model turns, real processes, real time) is the Part A experiment's
workers with the answers' renewer, measured by the trusted side itself (``renewed``): the
workers are this side's, and call the answers' chapter and ``keep_renewing`` in sandboxes of
their own; the figures and the receipt are this side's. A receipt or shop the answers' own run
writes earns nothing, and so do the renewer's ``lease_renewals`` rows and ``report=`` entries
on their own: the answers write them, with times they choose. What the renewer did is weighed
by the run's watch of each lease (``watched``: every change of its generation or end, read on
a connection of this side's at this side's clock), and the rows only against it. Every test of
the run shares it. Nothing here compares a measured duration with a threshold.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lucyshop.lab.exercises.exercise_receipts import receipt_problems
from lucyshop.lab.exercises.renewal import (
    EPSILON,
    ends_unrecorded,
    extensions,
    progress_stopped,
    stale_extensions,
)
from lucyshop.lab.loader import ROOT

EXERCISE = "exercise_5_renewal"
COMMITTED = ROOT / "evidence" / "ch13-exercise5-renewal-receipt.json"

pytestmark = pytest.mark.timeout(900)


# ---------------------------------------------------------------- the measured answer (quick)


@pytest.fixture
def result(renewed):
    return renewed


def test_the_receipt_recomputes_from_its_observations(result, leases):
    assert receipt_problems(result["receipt"], leases) == []


def test_the_receipt_records_its_provenance(result, provenance):
    _receipt, settings = provenance(result["receipt"], 5)
    assert settings["model"]["name"] and settings["impl"]["sha256"]
    if settings["backend"] == "embedded":
        assert len(settings["model"]["sha256"]) == 64
    assert settings["quick"] is True and settings["max_tokens"] > 0 and "temperature" in settings


def test_only_the_holders_generation_renews_and_no_stale_completion_lands(result, read, query):
    db = read(Path(result["shops"]["false-expiry"]) / "shop.db")
    work = query(
        db,
        "SELECT w.work_id, l.generation AS lease, o.generation AS outcome FROM work w"
        " JOIN assignment_leases l USING (work_id) LEFT JOIN outcomes o USING (work_id)",
    )
    assert work and all(row["outcome"] == row["lease"] for row in work), (
        "each outcome is its last holder's"
    )
    for row in result["observations"]["false_expiry"]["trials"]:
        watched = row["watched"]
        assert any(seen == row["generation"] for _at, seen, _end in watched), "its lease was seen"
        assert stale_extensions(watched, row["generation"]) == 0, "extended under a later holder"


def test_the_plain_arm_never_renews_and_the_renewing_arms_do(result):
    trials = result["observations"]["false_expiry"]["trials"]
    assert {row["arm"] for row in trials} == {"plain", "renewed", "bounded"}
    for row in trials:
        extended = extensions(row["watched"], row["generation"], row["expires"])
        assert bool(extended) == (row["arm"] != "plain"), (row["arm"], "seen extended", extended)
        assert ends_unrecorded(row, row["generation"], row["expires"]) == 0, (
            "every end its lease was seen extended to is one of its renewal rows"
        )


def hung_turn(result, name: str) -> tuple[dict, int, float]:
    """The hung turn ``name``, its generation and the end its claim gave its lease."""
    hung = result["observations"]["hung"][name]
    lease = result["figures"]["pilot"]["lease"]
    return hung, hung["hung"]["generation"], hung["hung"]["claimed_at"] + lease


def test_a_hung_turn_with_an_unbounded_renewer_keeps_its_lease(result):
    hung, generation, claimed = hung_turn(result, "unbounded")
    assert hung["takeover_in_window"] is None, "no replacement took it over while its renewer ran"
    hung_at = hung["hung"]["hung_at"]
    assert extensions(hung["watched"], generation, claimed, after=hung_at), (
        "its lease was seen extended after the turn hung"
    )
    bounded_took = result["observations"]["hung"]["bounded"]["takeover"]["took_at"]
    assert extensions(hung["watched"], generation, claimed, after=bounded_took), (
        "still extended after the bounded one was taken over"
    )


def test_the_bounded_renewer_lets_a_hung_turn_be_taken_over(result, read, query):
    hung, generation, claimed = hung_turn(result, "bounded")
    db = read(Path(result["shops"]["hung"]) / "shop.db")
    work_id = hung["hung"]["work_id"]
    outcome = query(db, "SELECT generation FROM outcomes WHERE work_id = ?", work_id)
    assert outcome and outcome[0]["generation"] > generation, "the replacement finished it"
    assert extensions(hung["watched"], generation, claimed, after=progress_stopped(hung)), (
        "its lease was seen extended after its progress stopped, within its bound"
    )
    ends = [end for _at, seen, end in hung["watched"] if seen == generation]
    assert max(ends) <= hung["takeover"]["took_at"] + EPSILON, (
        "its lease had run out when it was taken over: the renewals stopped"
    )


def test_a_step_slower_than_the_bound_stops_progress_at_the_last_progress_not_the_hang():
    """On a busy machine a hung turn's one step can outlast the bound: it is taken over before
    it hangs, and the renewals that kept it alive came after its last progress (the claim)."""
    claim = {"generation": 1, "claimed_at": 0.0, "hung_at": 5.2}  # taken over at 2.9
    watched = [[0.05, 1, 1.1], [0.4, 1, 1.5], [0.8, 1, 1.9], [2.95, 2, 4.0]]
    renewed = {"hung": claim, "watched": watched, "renewals": [{"progressed_at": 0.01}]}
    assert progress_stopped(renewed) == 0.01
    assert extensions(watched, 1, 1.0, after=claim["hung_at"]) == 0, "nothing after the hang"
    assert extensions(watched, 1, 1.0, after=progress_stopped(renewed)) == 3
    never = {"hung": claim, "watched": [[0.05, 1, 1.0], [2.95, 2, 4.0]], "renewals": []}
    assert extensions(never["watched"], 1, 1.0, after=progress_stopped(never)) == 0
    hung_late = {"hung": claim | {"hung_at": 0.3}, "renewals": [{"progressed_at": 0.35}]}
    assert progress_stopped(hung_late) == 0.3, "the renewer notices progress after the step"


def test_the_committed_receipt_recomputes_from_its_observations(leases, load_receipt):
    assert COMMITTED.is_file(), f"{COMMITTED} is missing: run python solutions/exercises.py 5"
    assert receipt_problems(COMMITTED, leases) == []
    assert load_receipt(COMMITTED)["settings"]["quick"] is False
