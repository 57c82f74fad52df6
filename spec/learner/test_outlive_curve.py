"""``outlive_curve(turns, leases)``: (lease, share of turns that outlive it), in the order given."""

from __future__ import annotations

import math

import pytest
from learner_support import refuses

TURNS = [4.0, 1.0, 3.0, 2.0]


def test_pairs_in_the_order_given(impl):
    got = impl.outlive_curve(TURNS, [3, 0, 4, 1.5])
    want = [(3, 0.25), (0, 1.0), (4, 0.0), (1.5, 0.75)]
    assert [tuple(p) for p in got] == want, (
        f"outlive_curve({TURNS}, [3, 0, 4, 1.5]) is {want}, got {got}"
    )


def test_any_iterable_of_leases(impl):
    got = impl.outlive_curve(TURNS, (x / 2 for x in range(0, 10, 3)))
    want = [(0.0, 1.0), (1.5, 0.75), (3.0, 0.25), (4.5, 0.0)]
    assert [tuple(p) for p in got] == want, f"leases from a generator give {want}, got {got}"


def test_a_list_of_pairs(impl):
    got = impl.outlive_curve(TURNS, [2.0])
    assert isinstance(got, list) and len(got) == 1 and len(got[0]) == 2, (
        f"one pair per lease, got {got!r}"
    )


def test_no_leases_no_points(impl):
    assert impl.outlive_curve(TURNS, []) == [], "no leases give no points"


def test_the_curve_never_rises(impl):
    turns = [0.2, 0.9, 0.4, 1.7, 0.6, 0.6, 1.1]
    points = impl.outlive_curve(turns, [x / 10 for x in range(20)])
    shares = [share for _lease, share in points]
    assert shares == sorted(shares, reverse=True), (
        f"a longer lease is never outlived more often: {shares}"
    )


def test_empty_turns_are_refused(impl):
    with refuses(ValueError, "outlive_curve([], [1.0])"):
        impl.outlive_curve([], [1.0])


@pytest.mark.parametrize("lease", [-1.0, math.nan], ids=["negative", "nan"])
def test_a_bad_lease_is_refused(impl, lease):
    with refuses(ValueError, f"outlive_curve(turns, [1.0, {lease}])"):
        impl.outlive_curve(TURNS, [1.0, lease])
