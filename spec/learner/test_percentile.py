"""``percentile(values, q)``: nearest rank, the smallest sample with at least q% at or below it."""

from __future__ import annotations

import math
import random

import pytest
from learner_support import refuses

ORDERED = [k / 10 for k in range(1, 41)]  # 40 samples: the k-th smallest is k/10
SHUFFLED = random.Random(13).sample(ORDERED, len(ORDERED))


def kth(k: int) -> float:
    return ORDERED[k - 1]


@pytest.mark.parametrize(("q", "k"), [(50, 20), (90, 36), (100, 40)])
def test_p50_p90_p100_of_40_samples_are_the_20th_36th_40th_smallest(impl, q, k):
    got = impl.percentile(SHUFFLED, q)
    assert got == kth(k), f"p{q} of 40 samples is the {k}th smallest ({kth(k)}), got {got}"


@pytest.mark.parametrize(("q", "k"), [(33, 14), (26, 11), (99, 40), (2.5, 1), (97.5, 39)])
def test_a_rank_between_two_samples_rounds_up(impl, q, k):
    # 33% of 40 is 13.2 samples: the smallest sample with at least 33% at or below it is the 14th.
    got = impl.percentile(SHUFFLED, q)
    assert got == kth(k), f"p{q} of 40 samples is the {k}th smallest ({kth(k)}), got {got}"


def test_q_0_is_the_minimum(impl):
    got = impl.percentile(SHUFFLED, 0)
    assert got == min(ORDERED), f"p0 is the smallest sample ({min(ORDERED)}), got {got}"


def test_unsorted_input_gives_the_same_answer_as_sorted(impl):
    for q in (10, 50, 75, 90):
        assert impl.percentile(SHUFFLED, q) == impl.percentile(ORDERED, q), (
            f"p{q} must not depend on the order of the samples"
        )
    descending = sorted(ORDERED, reverse=True)
    got = impl.percentile(descending, 50)
    assert got == kth(20), f"p50 of samples given largest first is {kth(20)}, got {got}"


def test_the_answer_is_one_of_the_samples(impl):
    turns = [0.8, 0.3, 2.6, 1.1, 0.5]
    for q in range(0, 101, 5):
        got = impl.percentile(turns, q)
        assert got in turns, f"p{q} of {turns} must be one of the samples (nearest rank), got {got}"


def test_one_sample_is_every_percentile(impl):
    for q in (0, 1, 50, 100):
        assert impl.percentile([2.5], q) == 2.5, f"p{q} of a single sample 2.5 is 2.5"


def test_empty_input_is_refused(impl):
    with refuses(ValueError, "percentile([], 50)"):
        impl.percentile([], 50)


@pytest.mark.parametrize("q", [-1, -0.001, 100.5, 101, math.nan, math.inf, -math.inf])
def test_q_outside_0_to_100_is_refused(impl, q):
    with refuses(ValueError, f"percentile(samples, {q})"):
        impl.percentile(SHUFFLED, q)


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, -0.5], ids=["nan", "inf", "-inf", "negative"]
)
def test_a_sample_that_is_not_a_duration_is_refused(impl, bad):
    with refuses(ValueError, f"percentile with a sample of {bad}"):
        impl.percentile([0.5, bad, 1.5], 50)
