"""``detection_delay(lease, turn, scan)``: lease - turn/2 + scan/2,
for a crash uniform in a turn."""

from __future__ import annotations

import math

import pytest
from learner_support import refuses


def test_the_books_detection_case(impl):
    got = impl.detection_delay(5.338, 0.539, 0.05)
    assert got == pytest.approx(5.0935), (
        f"a 5.338s lease, 0.539s turn and 50ms scans: 5.338 - 0.2695 + 0.025 = 5.0935, got {got}"
    )


@pytest.mark.parametrize(
    ("lease", "turn", "scan", "delay"),
    [(10, 4, 1, 8.5), (2, 2, 0, 1.0), (3, 0, 0, 3.0), (1, 0.5, 0.2, 0.85), (30, 1, 0.5, 29.75)],
)
def test_lease_minus_half_a_turn_plus_half_a_scan(impl, lease, turn, scan, delay):
    got = impl.detection_delay(lease, turn, scan)
    assert got == pytest.approx(delay), (
        f"detection_delay({lease}, {turn}, {scan}) is {delay}, got {got}"
    )


def test_slower_scans_detect_later(impl):
    fast, slow = impl.detection_delay(5, 1, 0.05), impl.detection_delay(5, 1, 1.05)
    assert slow - fast == pytest.approx(0.5), (
        f"a scan 1s slower adds half a second, got {slow - fast}"
    )


@pytest.mark.parametrize(
    ("lease", "turn", "scan"),
    [
        (-1, 0.5, 0.05),
        (5, -0.5, 0.05),
        (5, 0.5, -0.05),
        (math.nan, 0.5, 0.05),
        (5, math.nan, 0.05),
        (5, 0.5, math.nan),
        (math.inf, 0.5, 0.05),
        (5, 0.5, math.inf),
        (0, 0, 0.05),
        (1.0, 1.5, 0.05),
    ],
    ids=[
        "negative-lease",
        "negative-turn",
        "negative-scan",
        "nan-lease",
        "nan-turn",
        "nan-scan",
        "inf-lease",
        "inf-scan",
        "zero-lease",
        "turn-longer-than-lease",
    ],
)
def test_inputs_outside_the_model_are_refused(impl, lease, turn, scan):
    with refuses(ValueError, f"detection_delay({lease}, {turn}, {scan})"):
        impl.detection_delay(lease, turn, scan)
