"""``shortest_lease(turns, target)``: the smallest observed turn whose false-expiry share <=
target."""

from __future__ import annotations

import math
import random

import pytest
from learner_support import refuses

ORDERED = [k / 10 for k in range(1, 41)]  # the k-th smallest is k/10
SHUFFLED = random.Random(7).sample(ORDERED, len(ORDERED))


@pytest.mark.parametrize(
    ("target", "k", "name"),
    [(0.5, 20, "p50"), (0.1, 36, "p90"), (0.05, 38, "the 38th smallest"), (0, 40, "the maximum")],
    ids=["p50", "p90", "38th", "max"],
)
def test_the_books_targets_on_40_turns(impl, target, k, name):
    got = impl.shortest_lease(SHUFFLED, target)
    want = ORDERED[k - 1]
    assert got == want, (
        f"the shortest lease with false expiry at most {target} on 40 turns is {name} ({want}), "
        f"got {got}"
    )


def test_only_observed_turns_are_candidates(impl):
    got = impl.shortest_lease([0.5, 1.5], 0.4)
    assert got == 1.5, (
        f"with turns 0.5 and 1.5 and target 0.4 the lease is the observed 1.5, got {got}"
    )


def test_repeated_turns(impl):
    turns = [1.0, 1.0, 1.0, 2.0]
    assert impl.shortest_lease(turns, 0.25) == 1.0, "a lease of 1.0 is outlived by 1 of 4 turns"
    assert impl.shortest_lease(turns, 0.2) == 2.0, "only 2.0 keeps false expiry at or below 0.2"
    assert impl.shortest_lease(turns, 1) == 1.0, "target 1 accepts the smallest turn"


def test_the_lease_meets_its_target(impl):
    turns = [0.3, 0.9, 0.4, 2.2, 0.7, 1.3, 0.5, 0.6, 1.0, 0.8]
    for target in (0, 0.1, 0.15, 0.3, 0.5, 0.99):
        got = impl.shortest_lease(turns, target)
        share = sum(t > got for t in turns) / len(turns)
        smaller = [t for t in turns if t < got]
        assert got in turns and share <= target, (
            f"shortest_lease({target}) = {got} outlived by {share}"
        )
        for t in smaller:
            assert sum(u > t for u in turns) / len(turns) > target, (
                f"shortest_lease({target}) = {got}, but the shorter observed {t} also meets it"
            )


@pytest.mark.parametrize("target", [-0.1, 1.1, math.nan, math.inf])
def test_a_target_that_is_not_a_share_is_refused(impl, target):
    with refuses(ValueError, f"shortest_lease(turns, {target})"):
        impl.shortest_lease(SHUFFLED, target)


def test_empty_turns_are_refused(impl):
    with refuses(ValueError, "shortest_lease([], 0.1)"):
        impl.shortest_lease([], 0.1)


@pytest.mark.parametrize("bad", [math.nan, -0.2, math.inf], ids=["nan", "negative", "inf"])
def test_a_turn_that_is_not_a_duration_is_refused(impl, bad):
    with refuses(ValueError, f"shortest_lease with a turn of {bad}"):
        impl.shortest_lease([0.5, bad, 1.0], 0.1)
