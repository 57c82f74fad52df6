"""The skew experiment: its committed receipt, recomputed, and real trials on each store."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from lucyshop.lab import skew
from lucyshop.lab.experiment.control import unfenced
from lucyshop.lab.loader import impl_path

RECEIPT = Path(__file__).resolve().parents[2] / "evidence" / "ch13-skew-receipt.json"


@pytest.fixture(scope="module")
def receipt() -> dict:
    return json.loads(RECEIPT.read_text())


def test_the_committed_receipt_follows_from_its_trials(receipt):
    assert skew.problems_in(receipt) == []
    assert all(receipt["conclusions"].values()), receipt["conclusions"]
    provenance = receipt["provenance"]
    for field in ("postgres_server_version", "seeds", "host", "utc", "command", "code"):
        assert provenance[field], field
    assert "load_average_before" in provenance
    assert receipt["parameters"]["shifts_leases"] == list(skew.SHIFTS)
    assert receipt["parameters"]["repeats"] >= 5


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
    judged = {kind: skew.counts_of(trial) for kind, trial in trials.items()}
    assert judged["sqlite"]["false_takeover"] == 1 and judged["sqlite"]["stale_accepted"] == 0
    assert judged["sqlite"]["refused_by"] == {"generation": 2}, "one owner label: the generation"
    assert judged["postgres"]["false_takeover"] == 0, trials


@pytest.mark.slow
def test_a_slow_holder_on_postgres_is_refused_by_the_generation_and_accepted_without_it(
    pg_server, tmp_path
):
    impl = impl_path("solutions")
    unfenced(impl, tmp_path / impl.name)
    unfenced(impl.with_name("ch13_postgres.py"), tmp_path / "ch13_postgres.py")
    counts = {
        arm: skew.counts_of(
            skew.run_trial(
                "postgres",
                0.0,
                "none",
                "slow",
                impl=path,
                server=pg_server,
                work=skew.LEASE * skew.SLOW,
                arm=arm,
            )
        )
        for arm, path in (("fenced", impl), ("control", tmp_path / impl.name))
    }
    assert counts["fenced"]["refused_by"] == {"generation": 2}, counts
    assert (counts["control"]["stale_writes"], counts["control"]["stale_accepted"]) == (2, 2)
