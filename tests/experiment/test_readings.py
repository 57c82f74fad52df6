"""13a's readings of the Part A receipt follow its data: a copy whose turns say otherwise
makes them say otherwise, and no verdict outruns its test.

Each copy changes the committed receipt's raw turns and recomputes its figures from them, as a
re-measured receipt would have them; the readings are then printed from the copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from lucyshop.lab.experiment.receipt import RULES, figures
from lucyshop.lab.lesson import story
from lucyshop.lab.loader import ROOT, load_impl

COMMITTED = ROOT / "evidence" / "ch13-leases-receipt.json"


@pytest.fixture(scope="module")
def receipt() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text())


def trial_rows(observed: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for rule in RULES for row in observed["false_expiry"][rule]["trials"]]


def reread(receipt: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A copy of ``receipt`` whose observations ``change`` edited, its figures recomputed."""
    copied = copy.deepcopy(receipt)
    change(copied["observations"])
    copied["figures"] = figures(copied["observations"], copied["settings"], load_impl("solutions"))
    return copied


def slower_trials(observed: dict[str, Any]) -> None:
    """Every trial turn the pilot's own (cycled) at twice its seconds: as long in tokens,
    twice as slow per token, whatever the receipt's own trials happened to be."""
    pilot = observed["pilot"]
    for number, row in enumerate(trial_rows(observed)):
        turn = pilot[number % len(pilot)]
        row["turn_seconds"], row["tokens"] = 2 * turn["seconds"], turn["tokens"]


def trials_like_the_pilot(observed: dict[str, Any]) -> None:
    """The trials' turns are the pilot's own, turn for turn (cycled)."""
    pilot = observed["pilot"]
    for number, row in enumerate(trial_rows(observed)):
        turn = pilot[number % len(pilot)]
        row["turn_seconds"], row["tokens"] = turn["seconds"], turn["tokens"]


def more_capped_trials(observed: dict[str, Any]) -> None:
    """The same speed, but every trial turn runs to the cap: longer by length alone."""
    cap = max(turn["tokens"] for turn in observed["pilot"])
    capped = [t for t in observed["pilot"] if t["tokens"] >= cap] or observed["pilot"]
    for number, row in enumerate(trial_rows(observed)):
        turn = capped[number % len(capped)]
        row["turn_seconds"], row["tokens"] = turn["seconds"], turn["tokens"]


def read(receipt: dict[str, Any]) -> str:
    return "\n".join(story.pilot_against_trials(receipt))


def test_trials_twice_as_slow_are_read_as_longer_and_slower_per_token(receipt: dict) -> None:
    text = read(reread(receipt, slower_trials))
    assert "by rank (Mann-Whitney), the trials ran longer (p " in text
    assert "slower per token in the trials (p " in text


def test_trials_that_are_the_pilots_own_turns_show_no_difference(receipt: dict) -> None:
    text = read(reread(receipt, trials_like_the_pilot))
    assert "ran longer" not in text and "ran shorter" not in text
    assert "per token in the trials (p" not in text
    assert text.count("no difference these samples can tell") >= 4


def test_longer_by_the_cap_is_read_as_length_not_speed(receipt: dict) -> None:
    """All capped, at the pilot's own speed: more capped in the trials, the speed unchanged."""
    text = read(reread(receipt, more_capped_trials))
    assert "more capped in the trials (p " in text
    assert "per token in the trials (p" not in text


@pytest.mark.parametrize("change", [slower_trials, trials_like_the_pilot, more_capped_trials])
def test_no_verdict_outruns_its_test(receipt: dict, change: Callable) -> None:
    """Every line that names a difference carries a p below 0.05, and every p below 0.05
    names one: the old median-ratio verdict ('the trials ran slower') is gone."""
    lines = story.pilot_against_trials(reread(receipt, change))
    # the last line is the cap's range and the drift line a measured move, neither a test
    for line in (line for line in lines[:-1] if not line.startswith("drift:")):
        said = line.rsplit("(p ", 1)
        assert len(said) == 2, line
        p = float(said[1].rstrip(")"))
        assert ("no difference" in line) == (p >= story.SURPRISING), line
    assert all("ran slower than the pilot" not in line for line in lines)


def test_the_committed_receipt_reads_without_a_median_ratio(receipt: dict) -> None:
    text = read(receipt)
    assert "x as long" not in text and "median ratio" not in text
    assert "The cap bounds tokens, not seconds" in text


def test_a_rule_with_none_seen_and_none_forecast_is_bounded_by_the_rule_of_three(
    receipt: dict,
) -> None:
    row = receipt["figures"]["false_expiry"]["twice_max"]
    lines = story.binomial_readings(receipt)
    if row["false_expiries"] == 0 and row["predicted_share"] == 0:
        bound = f"below {3 / row['trials']:.1%} with about 95% confidence (the rule of three)"
        assert any(line.startswith("twice_max:") and bound in line for line in lines)
    else:
        assert not any("rule of three" in line for line in lines if line.startswith("twice_max"))


def test_the_fence_is_credited_only_where_the_generation_decided(receipt: dict) -> None:
    said = story.fence_readings(receipt)[-1]
    assert said.startswith("Only the generation told")
    forged = copy.deepcopy(receipt)
    forged["figures"]["control"]["accepted"] = 0  # a control that accepted nothing proves none
    assert story.fence_readings(forged)[-1].startswith("These runs do not show the generation")
