"""How surprising a measured result is, in the kit's own arithmetic (no SciPy).

- ``binomial_two_sided(count, trials, share)``: the probability, for ``trials`` independent
  trials each failing with probability ``share``, of a count at least as far from the
  expected ``trials * share`` as ``count`` is.
- ``mann_whitney(first, second)``: the two-sample Mann-Whitney U test of whether one sample's
  values tend to be larger than the other's; exact for small samples without ties, else the
  tie-corrected normal approximation with a continuity correction.
- ``median_interval(values)``: a distribution-free confidence interval for the median, from
  two order statistics of the sample (the sign test's interval).
- ``wilson(k, n)``: the Wilson score interval of a share k/n.
- ``nearest_rank(values, q)``: the q-th percentile as a value the sample holds (the lessons'
  rule; an interpolated median can be a turn that never happened).
- ``fisher_exact(k1, n1, k2, n2)``: the two-sided p of Fisher's exact test that two shares
  k1/n1 and k2/n2 are one.
- ``beta_binomial(count, trials, k, n)``: what ``trials`` new trials may count when the share
  itself is known only from a sample k of n (Jeffreys prior): the central 95% range of counts
  and the two-sided p of ``count``.
- ``rule_of_three(n)``: the 95% upper bound on a share after 0 of n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

EXACT_PAIRS = 400  # n1 * n2 up to this (and no ties): the exact distribution of U
SLACK = 1e-9  # two distances this close are the same distance


def binomial_two_sided(count: int, trials: int, share: float) -> float:
    """P(|X - n p| >= |count - n p|) for X ~ Binomial(trials, share)."""
    if trials < 1 or not 0 <= count <= trials or not 0.0 <= share <= 1.0:
        raise ValueError(
            f"need 0 <= count <= trials, trials >= 1, 0 <= share <= 1: {count}, {trials}, {share}"
        )
    expected = trials * share
    far = abs(count - expected) - SLACK
    total = sum(
        math.comb(trials, k) * share**k * (1.0 - share) ** (trials - k)
        for k in range(trials + 1)
        if abs(k - expected) >= far
    )
    return min(1.0, total)


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) of ``values`` in their own order, and the size of each tie."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = []
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for index in order[start : end + 1]:
            ranks[index] = (start + end) / 2 + 1
        ties.append(end - start + 1)
        start = end + 1
    return ranks, ties


@cache
def _arrangements(m: int, n: int, u: int) -> int:
    """How many orderings of m first-sample and n second-sample values give U = u."""
    if u < 0 or u > m * n:
        return 0
    if m == 0 or n == 0:
        return 1 if u == 0 else 0
    return _arrangements(m - 1, n, u - n) + _arrangements(m, n - 1, u)


def mann_whitney(first: Sequence[float], second: Sequence[float]) -> dict[str, Any]:
    """U of ``first`` against ``second``, and the two-sided p-value of no difference."""
    m, n = len(first), len(second)
    if m == 0 or n == 0:
        raise ValueError("both samples need at least one value")
    ranks, ties = _ranks([*first, *second])
    u = sum(ranks[:m]) - m * (m + 1) / 2
    mean = m * n / 2
    if m * n <= EXACT_PAIRS and all(size == 1 for size in ties):
        low = min(u, m * n - u)
        tail = sum(_arrangements(m, n, k) for k in range(int(low) + 1)) / math.comb(m + n, m)
        return {"u": u, "n1": m, "n2": n, "method": "exact", "p_value": min(1.0, 2 * tail)}
    size = m + n
    variance = m * n / 12 * ((size + 1) - sum(t**3 - t for t in ties) / (size * (size - 1)))
    if variance <= 0:  # every value equal: no evidence of any difference
        return {"u": u, "n1": m, "n2": n, "method": "normal", "p_value": 1.0}
    z = max(0.0, abs(u - mean) - 0.5) / math.sqrt(variance)
    return {"u": u, "n1": m, "n2": n, "method": "normal", "p_value": math.erfc(z / math.sqrt(2))}


def median_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """The narrowest pair of order statistics that covers the median with at least
    ``confidence``, for any continuous distribution; with too few values, the whole sample
    (and the confidence it actually has)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need at least one value and 0 < confidence < 1: {n}, {confidence}")

    def missed(k: int) -> float:  # P(the median lies outside the k-th smallest and largest)
        return 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n

    left_out = 0  # values left out on each side of the interval
    while left_out + 1 < n / 2 and missed(left_out + 1) <= 1.0 - confidence:
        left_out += 1
    return {
        "low": ordered[left_out],
        "high": ordered[n - 1 - left_out],
        "confidence": max(0.0, 1.0 - missed(left_out)),
    }


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a share k/n (95% with z = 1.96): honest at n = 20 and at
    k = 0, where the plain k/n ± z·sqrt(p(1-p)/n) collapses to a point."""
    if n <= 0:
        raise ValueError("n must be positive")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The smallest sample with at least ``q`` percent of the samples at or below it."""
    ordered = sorted(values)
    if not ordered or not 0 <= q <= 100:
        raise ValueError(f"need at least one value and 0 <= q <= 100: {len(ordered)}, {q}")
    return ordered[max(1, math.ceil(q * len(ordered) / 100)) - 1]


def _two_sided(probabilities: Sequence[float], observed: int) -> float:
    """The summed probability of every outcome no likelier than ``observed``."""
    cut = probabilities[observed] * (1 + 1e-7)
    return min(1.0, sum(p for p in probabilities if p <= cut))


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p that k1 of n1 and k2 of n2 come from one share (Fisher's exact test)."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2 and n1 > 0 and n2 > 0):
        raise ValueError(f"need 0 <= k <= n and n >= 1: {k1}/{n1}, {k2}/{n2}")
    total, both = n1 + n2, k1 + k2
    low, high = max(0, both - n2), min(both, n1)
    odds = [
        math.comb(n1, k) * math.comb(n2, both - k) / math.comb(total, both)
        if low <= k <= high
        else 0.0
        for k in range(n1 + 1)
    ]
    return _two_sided(odds, k1)


def beta_binomial(count: int, trials: int, k: int, n: int) -> dict[str, Any]:
    """The counts ``trials`` trials may show when their share is known only as k of n: the
    share's Jeffreys posterior Beta(k + 1/2, n - k + 1/2) mixed over Binomial(trials, share).
    The central range holds at least 95% of the mass; ``p_value`` is two-sided for ``count``."""
    if not (0 <= k <= n and n > 0 and 0 <= count <= trials and trials > 0):
        raise ValueError(f"need 0 <= k <= n, 0 <= count <= trials: {k}/{n}, {count}/{trials}")
    a, b = k + 0.5, n - k + 0.5

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    mass = [
        math.comb(trials, j) * math.exp(log_beta(j + a, trials - j + b) - log_beta(a, b))
        for j in range(trials + 1)
    ]
    low, below = 0, 0.0
    while below + mass[low] <= 0.025:
        below += mass[low]
        low += 1
    high, above = trials, 0.0
    while above + mass[high] <= 0.025:
        above += mass[high]
        high -= 1
    return {"range": [low, high], "p_value": _two_sided(mass, count)}


def rule_of_three(n: int) -> float:
    """After 0 events in n trials, the share is below 3/n with about 95% confidence."""
    if n < 1:
        raise ValueError("n must be positive")
    return min(1.0, 3 / n)
