"""``false_expiry_share(turns, lease)``: the share of turns strictly longer than the lease."""

from __future__ import annotations

import math

import pytest
from learner_support import refuses

TURNS = [1.0, 2.0, 3.0, 4.0]
FORTY = [k / 10 for k in range(1, 41)]


@pytest.mark.parametrize(
    ("lease", "share"), [(0.0, 1.0), (0.5, 1.0), (1.5, 0.75), (2.5, 0.5), (3.9, 0.25), (10, 0.0)]
)
def test_share_of_turns_longer_than_the_lease(impl, lease, share):
    got = impl.false_expiry_share(TURNS, lease)
    assert got == share, (
        f"of turns {TURNS}, a share of {share} outlive a lease of {lease}, got {got}"
    )


@pytest.mark.parametrize(("lease", "share"), [(1.0, 0.75), (2.0, 0.5), (4.0, 0.0)])
def test_a_turn_equal_to_the_lease_does_not_count(impl, lease, share):
    got = impl.false_expiry_share(TURNS, lease)
    assert got == share, (
        f"a turn of exactly {lease}s finishes within a {lease}s lease: share {share}, got {got}"
    )


def test_the_median_of_40_turns_loses_half(impl):
    got = impl.false_expiry_share(list(reversed(FORTY)), 2.0)  # 2.0 is the 20th smallest
    assert got == 0.5, (
        f"a lease at the median of 40 turns is outlived by 20 of them (0.5), got {got}"
    )


def test_the_answer_is_a_float_share(impl):
    got = impl.false_expiry_share([1, 2, 3], 2)
    assert isinstance(got, float) and got == pytest.approx(1 / 3), (
        f"1 of 3 turns outlives 2s, got {got!r}"
    )


def test_empty_turns_are_refused(impl):
    with refuses(ValueError, "false_expiry_share([], 1.0)"):
        impl.false_expiry_share([], 1.0)


@pytest.mark.parametrize("lease", [-1.0, math.nan, math.inf], ids=["negative", "nan", "inf"])
def test_a_lease_that_is_not_a_duration_is_refused(impl, lease):
    with refuses(ValueError, f"false_expiry_share(turns, {lease})"):
        impl.false_expiry_share(TURNS, lease)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf], ids=["negative", "nan", "inf"])
def test_a_turn_that_is_not_a_duration_is_refused(impl, bad):
    with refuses(ValueError, f"false_expiry_share with a turn of {bad}"):
        impl.false_expiry_share([1.0, bad], 1.0)
