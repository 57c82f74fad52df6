"""Exercise 5, renew the lease: a fenced renewal, and a quick real run weighed by what the
trusted side saw of its leases.

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

import dataclasses
import threading
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
from lucyshop.lab.given import prepare_renewals
from lucyshop.lab.loader import ROOT

EXERCISE = "exercise_5_renewal"
COMMITTED = ROOT / "evidence" / "ch13-exercise5-renewal-receipt.json"
T = 1_000.0

pytestmark = pytest.mark.timeout(900)


# ---------------------------------------------------------------- renew, on its own (injected time)


@pytest.fixture
def renewal_shop(exercises, tmp_path):
    leases = exercises.chapter()
    db, queue = leases.open_worker_shop(tmp_path / "shop.db")
    prepare_renewals(db)
    leases.enqueue(queue, "s-1", "session-a", "a long turn")
    yield leases, db
    db.close()


def test_renew_extends_the_current_holders_lease(exercises, renewal_shop, query):
    leases, db = renewal_shop
    held = leases.claim(db, "till", ttl=10, now=T)
    renewed = exercises.renew(db, held, ttl=10, progress=0, now=T + 5)
    assert renewed.expires == T + 15 and renewed.generation == held.generation
    assert query(db, "SELECT expires FROM assignment_leases") == [{"expires": T + 15}]
    assert [r["renewed_at"] for r in query(db, "SELECT renewed_at FROM lease_renewals")] == [T + 5]


def test_renew_is_refused_to_a_stale_generation(exercises, renewal_shop, query):
    leases, db = renewal_shop
    old = leases.claim(db, "till", ttl=10, now=T)
    leases.claim(db, "till", ttl=10, now=T + 11)
    before = query(db, "SELECT * FROM assignment_leases")
    with pytest.raises(PermissionError):
        exercises.renew(db, old, ttl=10, progress=0, now=T + 12)
    assert query(db, "SELECT * FROM assignment_leases") == before
    assert query(db, "SELECT * FROM lease_renewals") == []


def test_renew_never_revives_an_expired_lease(exercises, renewal_shop, query):
    leases, db = renewal_shop
    held = leases.claim(db, "till", ttl=10, now=T)
    with pytest.raises(PermissionError):
        exercises.renew(db, held, ttl=10, progress=0, now=T + 10.5)
    assert query(db, "SELECT expires FROM assignment_leases") == [{"expires": T + 10}]


def test_a_bounded_renewal_stops_when_progress_stops(exercises, renewal_shop, query):
    leases, db = renewal_shop
    held = leases.claim(db, "till", ttl=10, now=T)
    exercises.renew(db, held, ttl=10, progress=0, bound=12, now=T)  # progress starts here
    capped = exercises.renew(db, held, ttl=10, progress=0, bound=12, now=T + 8)
    assert capped.expires == T + 12, "never more than the bound past the last progress"
    with pytest.raises(PermissionError):
        exercises.renew(db, held, ttl=10, progress=0, bound=12, now=T + 12)
    assert len(query(db, "SELECT seq FROM lease_renewals")) == 2


def test_progress_moves_the_bound_and_only_grows(exercises, renewal_shop, query):
    leases, db = renewal_shop
    held = leases.claim(db, "till", ttl=10, now=T)
    exercises.renew(db, held, ttl=10, progress=0, bound=12, now=T)
    moved = exercises.renew(db, held, ttl=10, progress=1, bound=12, now=T + 8)
    assert moved.expires == T + 18
    with pytest.raises(ValueError):
        exercises.renew(db, held, ttl=10, progress=0, bound=12, now=T + 9)
    assert [
        r["progress"] for r in query(db, "SELECT progress FROM lease_renewals ORDER BY seq")
    ] == [0, 1]


def run_renewer(exercises, held, *, bound, progress, stop_after, renewals=None):
    """``keep_renewing`` in a thread on its own connection; stopped once its ``report=``
    callback has had ``renewals`` granted renewals (so a slow machine changes nothing but the
    time taken), or after ``stop_after`` s."""
    shop = Path(held.shop)
    found: dict = {"entries": []}
    stopped = threading.Event()

    def report(entry: dict) -> None:
        found["entries"].append(entry)
        granted = sum(r["granted"] for r in found["entries"])
        if renewals is not None and granted >= renewals:
            stopped.set()

    def body():
        db = exercises._sandbox.kit("lucyshop.lab.sandbox.inside.shop_probes").connect(str(shop))
        try:
            found["returned"] = exercises.keep_renewing(
                db,
                held.claim,
                ttl=held.ttl,
                interval=0.05,
                bound=bound,
                progress=progress,
                stopped=stopped,
                report=report,
            )
        finally:
            db.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(stop_after)
    stopped.set()
    thread.join(10)
    assert not thread.is_alive(), "keep_renewing did not return once stopped"
    return found


@dataclasses.dataclass
class Held:
    shop: str
    claim: object
    ttl: float


@pytest.fixture
def live(exercises, tmp_path):
    leases = exercises.chapter()
    db, queue = leases.open_worker_shop(tmp_path / "live.db")
    prepare_renewals(db)
    leases.enqueue(queue, "r-1", "session-a", "a long turn")
    held = leases.claim(db, "till", ttl=5)
    yield Held(str(tmp_path / "live.db"), held, 5.0), db
    db.close()


def test_keep_renewing_renews_until_stopped_and_reports_each_renewal(exercises, live, query):
    held, db = live
    found = run_renewer(exercises, held, bound=None, progress=lambda: 0, stop_after=30, renewals=3)
    assert found["returned"] is None, "stopped, not refused"
    granted = [r for r in found["entries"] if r["granted"]]
    rows = query(db, "SELECT renewed_at, expires FROM lease_renewals ORDER BY seq")
    assert len(granted) == len(rows) == 3, "one row per granted renewal, until it was stopped"
    assert [r["expires"] for r in granted] == [r["expires"] for r in rows]
    assert query(db, "SELECT expires FROM assignment_leases")[0]["expires"] == rows[-1]["expires"]


def test_keep_renewing_returns_the_refusal_once_the_bound_is_reached(exercises, live, query):
    held, db = live
    found = run_renewer(exercises, held, bound=0.2, progress=lambda: 0, stop_after=5)
    assert found["returned"] and "PermissionError" not in found["returned"]
    last = found["entries"][-1]
    assert last["granted"] is False and last["refusal"] == found["returned"]
    rows = query(db, "SELECT progressed_at, renewed_at FROM lease_renewals")
    assert rows, "it renewed before the bound was reached"
    assert all(r["renewed_at"] < r["progressed_at"] + 0.2 for r in rows), "none granted after it"
    assert last["at"] >= rows[0]["progressed_at"] + 0.2, "refused only once the bound was reached"


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
