"""Exercise 5, renew the lease, its functions on their own: ``renew`` at injected times, and
``keep_renewing`` in a thread, stopped or refused. They run beside exercises 1-4 in make check;
the quick measured run (``test_exercise_5.py``, a pytest child of its own) is the same row.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from lucyshop.lab.given import prepare_renewals

EXERCISE = "exercise_5_renewal"
T = 1_000.0


# ---------------------------------------------------------------- renew, on its own (injected time)


def renewal_db(exercises, path: Path, source: str):
    """The chapter and its shop at ``path``, with exercise 5's renewals table and one item."""
    leases = exercises.chapter()
    db, queue = leases.open_worker_shop(path)
    prepare_renewals(db)
    leases.enqueue(queue, source, "session-a", "a long turn")
    return leases, db


@pytest.fixture
def renewal_shop(exercises, tmp_path):
    leases, db = renewal_db(exercises, tmp_path / "shop.db", "s-1")
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
    thread.join(5)
    assert not thread.is_alive(), "keep_renewing did not return once stopped"
    return found


@dataclasses.dataclass
class Held:
    shop: str
    claim: object
    ttl: float


@pytest.fixture
def live(exercises, tmp_path):
    leases, db = renewal_db(exercises, tmp_path / "live.db", "r-1")
    held = leases.claim(db, "till", ttl=5)
    yield Held(str(tmp_path / "live.db"), held, 5.0), db
    db.close()


def test_keep_renewing_renews_until_stopped_and_reports_each_renewal(exercises, live, query):
    held, db = live
    found = run_renewer(exercises, held, bound=None, progress=lambda: 0, stop_after=8, renewals=3)
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
