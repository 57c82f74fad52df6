"""The skew experiment's counts and conclusions (each can fail), its negative control, and real
slow-holder trials on SQLite, fenced and unfenced.

The committed receipt and the PostgreSQL trials are tested in ``tests/postgres/test_pg_skew.py``
(they need a server).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lucyshop.lab import skew
from lucyshop.lab.experiment.control import comparison, unfenced
from lucyshop.lab.loader import impl_path

SUPERSEDED = {
    "sqlite": "generation 1 of work 1 is superseded by 2",
    "postgres": "claim for work 1 generation 1 is superseded by generation 2",
}


def trial(
    store: str,
    fate: str,
    *,
    arm: str = "fenced",
    shift: float = 0.0,
    role: str = "none",
    taken_after: float | None = None,
    refusal: str | None = None,
) -> dict[str, Any]:
    """One trial's raw record: a holder claimed at 100 s, taken over ``taken_after`` later (or
    never); a live holder writes twice at 101.5 s, a slow one at 103 s, refused with
    ``refusal``."""
    writes = []
    if fate != "dead":
        at = 103.0 if fate == "slow" else 101.5
        writes = [
            {"write": w, "started": at, "accepted": refusal is None, "why": refusal or ""}
            for w in ("transcript", "outcome")
        ]
    taken = taken_after is not None
    return {
        "store": store,
        "arm": arm,
        "shift_leases": shift,
        "shifted": role,
        "fate": fate,
        "holder_claimed": 100.0,
        "holder_generation": 1,
        "taken_after": taken_after,
        "taker_generation": 2 if taken else None,
        "holder_writes": writes,
        "taken_at": 100.0 + taken_after if taken else None,
        "final_generation": 2 if taken else 1,
        # the stale holder's outcome where its writes went through, else the last holder's
        "outcome_generations": [1 if writes and refusal is None else 2 if taken else 1],
    }


def sound() -> list[dict[str, Any]]:
    """Trials whose every conclusion holds."""
    return [
        *(
            trial(store, "slow", taken_after=2.05, refusal=SUPERSEDED[store])
            for store in skew.STORES
        ),
        *(trial(store, "slow", arm="control", taken_after=2.05) for store in skew.STORES),
        trial(
            "sqlite",
            "live",
            shift=2.0,
            role="taker",
            taken_after=0.05,
            refusal=SUPERSEDED["sqlite"],
        ),
        trial("postgres", "live", shift=2.0, role="taker"),
        trial("sqlite", "live"),
        trial("sqlite", "dead", taken_after=2.05),
    ]


def find(trials: list[dict], **fields: Any) -> dict:
    return next(t for t in trials if all(t[k] == v for k, v in fields.items()))


def accepted_with_the_fence(trials: list[dict]) -> None:
    for write in find(trials, store="sqlite", fate="slow", arm="fenced")["holder_writes"]:
        write["accepted"], write["why"] = True, ""


def refused_by_the_state(trials: list[dict]) -> None:
    for write in find(trials, store="postgres", fate="slow", arm="fenced")["holder_writes"]:
        write["why"] = "work 1 is finished, not running"


def no_postgres_takeover(trials: list[dict]) -> None:
    trials.remove(find(trials, store="postgres", fate="slow", arm="fenced"))


def control_refused(trials: list[dict]) -> None:
    for write in find(trials, store="sqlite", arm="control")["holder_writes"]:
        write["accepted"], write["why"] = False, SUPERSEDED["sqlite"]


def server_time_taken(trials: list[dict]) -> None:
    """A live holder taken over at once, as a taker two leases ahead does on worker time."""
    row = find(trials, store="postgres", fate="live")
    row["taken_after"], row["taken_at"], row["final_generation"] = 0.05, 100.05, 2
    row["outcome_generations"] = [2]
    for write in row["holder_writes"]:
        write["accepted"], write["why"] = False, SUPERSEDED["postgres"]


def overran_on_server_time(trials: list[dict]) -> None:
    """A dead holder's work taken a quarter lease after its claim: early, whatever its fate."""
    row = find(trials, store="postgres", fate="live")
    row.update(fate="dead", holder_writes=[], taken_after=0.5, taken_at=100.5)
    row.update(taker_generation=2, final_generation=2, outcome_generations=[2])


def worker_time_not_taken(trials: list[dict]) -> None:
    row = find(trials, store="sqlite", fate="live", shift_leases=2.0)
    row["taken_after"] = row["taken_at"] = None


# Each conclusion, the change that breaks it, and every conclusion that then fails (a stale write
# accepted with the fence was, by the same token, not refused by the generation).
BROKEN: dict[str, tuple[Callable[[list[dict]], None], str | list[str]]] = {
    "accepted": (
        accepted_with_the_fence,
        ["no_stale_write_accepted", "the_generation_refused_every_stale_write"],
    ),
    "state": (refused_by_the_state, "the_generation_refused_every_stale_write"),
    "untaken": (no_postgres_takeover, "a_live_holder_was_taken_over_on_each_store"),
    "control": (control_refused, "the_control_accepted_every_stale_write"),
    "server": (
        server_time_taken,
        [
            "no_early_takeover_on_server_time",
            "fewer_false_takeovers_on_server_time_where_worker_time_predicts_them",
        ],
    ),
    "overran": (overran_on_server_time, "no_early_takeover_on_server_time"),
    "worker": (  # nothing for server time to do fewer of, either
        worker_time_not_taken,
        [
            "fewer_false_takeovers_on_server_time_where_worker_time_predicts_them",
            "worker_time_takes_over_as_the_shift_predicts_beyond_the_margin",
        ],
    ),
}


def test_sound_trials_meet_every_conclusion() -> None:
    assert all(skew.conclusions(skew.summarise(sound())).values())


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_each_conclusion_can_fail(broken: str) -> None:
    change, name = BROKEN[broken]
    trials = copy.deepcopy(sound())
    change(trials)
    found = skew.conclusions(skew.summarise(trials))
    assert [k for k, holds in found.items() if not holds] == (
        name if isinstance(name, list) else [name]
    )


def test_rows_are_by_store_arm_shift_role_and_fate_with_their_denominators() -> None:
    summary = skew.summarise(sound())
    row = summary["sqlite fenced +2 taker live"]
    assert (row["trials"], row["false_takeover"], row["could_write_stale"]) == (1, 1, 1)
    assert row["refused_by"] == {"generation": 2}
    assert summary["sqlite control +0 none slow"]["stale_accepted"] == 2
    assert not any(key.split()[0] not in skew.STORES for key in summary)


def test_a_receipt_whose_summary_was_edited_fails() -> None:
    trials = sound()
    summary = skew.summarise(trials)
    receipt = {"trials": trials, "summary": summary, "conclusions": skew.conclusions(summary)}
    assert skew.problems_in(receipt) == []
    receipt["summary"]["sqlite fenced +2 taker live"]["false_takeover"] = 0
    assert skew.problems_in(receipt) == ["the summary does not follow from the trials"]


def test_only_shifts_far_from_the_margin_are_predicted() -> None:
    assert skew.predicted_false("sqlite fenced +0.5 taker live") is True
    assert skew.predicted_false("sqlite fenced +0.5 holder live") is False
    assert skew.predicted_false("sqlite fenced -2 holder live") is True
    assert skew.predicted_false("sqlite fenced +0 none live") is False
    assert skew.predicted_false("sqlite fenced +0.2 taker live") is None
    assert skew.predicted_false("sqlite fenced -0.1 holder live") is None
    assert skew.predicted_false("sqlite fenced +2 taker dead") is None
    assert skew.predicted_false("postgres fenced +2 taker live") is False


@pytest.mark.parametrize("name", ["ch13_leases.py", "ch13_postgres.py"])
def test_the_control_copies_lose_the_generation_comparison_only(name: str, tmp_path: Path) -> None:
    source = impl_path("solutions").with_name(name)
    copied = unfenced(source, tmp_path / name).read_text()
    assert "superseded" not in copied and "not running" in copied and "expired" in copied
    assert "superseded" in source.read_text()


def test_a_file_without_the_generation_comparison_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text("def assert_current(connection, held):\n    return 1.0\n")
    with pytest.raises(ValueError, match="0 generation"):
        unfenced(plain, tmp_path / "out.py")


def test_each_refusal_is_named_by_its_comparison() -> None:
    assert comparison(SUPERSEDED["sqlite"]) == comparison(SUPERSEDED["postgres"]) == "generation"
    assert comparison("work 3 is finished, not running") == "state"
    assert comparison("work 3 is held by 'b#2', not 'a#1'") == "worker_id"
    assert comparison("the lease of a#1 on work 3 has expired") == "expiry"
    assert comparison("work 3 has no lease") == "exists"
    assert comparison("no") == "unnamed"


@pytest.mark.timeout(300)
def test_a_slow_holder_on_sqlite_is_refused_by_the_generation_and_accepted_without_it(
    tmp_path: Path,
) -> None:
    """Real worker processes under one owner label: the slow holder's two writes come while
    generation 2 holds the work; the fence refuses them by the generation, the copy without
    it accepts both."""
    impl = impl_path("solutions")
    control = unfenced(impl, tmp_path / "ch13_leases.py")
    counts = {
        arm: skew.counts_of(
            skew.run_trial(
                "sqlite", 0.0, "none", "slow", impl=path, server=None, work=skew.LEASE * skew.SLOW
            )
        )
        for arm, path in (("fenced", impl), ("control", control))
    }
    assert counts["fenced"]["refused_by"] == {"generation": 2}, counts
    assert counts["fenced"]["stale_accepted"] == 0
    assert (counts["control"]["stale_writes"], counts["control"]["stale_accepted"]) == (2, 2)
