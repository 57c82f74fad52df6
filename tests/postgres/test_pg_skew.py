"""The skew experiment: its committed receipt, recomputed, and one real trial on each store."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from lucyshop.lab import skew
from lucyshop.lab.loader import impl_path

RECEIPT = Path(__file__).resolve().parents[2] / "evidence" / "ch13-skew-receipt.json"


@pytest.fixture(scope="module")
def receipt() -> dict:
    return json.loads(RECEIPT.read_text())


def test_the_committed_receipt_follows_from_its_trials(receipt):
    assert skew.problems_in(receipt) == []
    assert receipt["conclusions"] == {
        "no_stale_write_accepted": True,
        "fewer_false_takeovers_on_server_time_at_every_nonzero_shift": True,
    }
    provenance = receipt["provenance"]
    for field in ("postgres_server_version", "seeds", "host", "utc", "command"):
        assert provenance[field], field
    assert "load_average_before" in provenance
    assert receipt["parameters"]["shifts_leases"] == [-2.0, -0.5, 0.0, 0.5, 2.0]


def test_the_check_catches_a_doctored_receipt(receipt):
    doctored = copy.deepcopy(receipt)
    live = next(t for t in doctored["trials"] if t["store"] == "postgres" and t["fate"] == "live")
    live["taken_after"], live["taken_at"] = 0.5, live["holder_claimed"] + 0.5
    problems = skew.problems_in(doctored)
    assert "the summary does not follow from the trials" in problems, problems


@pytest.mark.slow
def test_a_taker_two_leases_ahead_takes_a_live_holder_on_sqlite_only(pg_server):
    impl = impl_path("solutions")
    trials = {
        kind: skew.run_trial(
            kind, 2.0, "taker", "live", impl=impl, server=pg_server, work=skew.LEASE * skew.WORK
        )
        for kind in skew.STORES
    }
    counted = ("false_takeover", "late_takeover", "stale_accepted")
    judged = {
        kind: {name: skew.counts_of(trial)[name] for name in counted}
        for kind, trial in trials.items()
    }
    assert judged["sqlite"] == {"false_takeover": 1, "late_takeover": 0, "stale_accepted": 0}, (
        trials
    )
    assert judged["postgres"] == {"false_takeover": 0, "late_takeover": 0, "stale_accepted": 0}, (
        trials
    )
    refused = [w["accepted"] for w in trials["sqlite"]["holder_writes"]]
    assert refused == [False, False], "the superseded holder's writes are refused on SQLite"
