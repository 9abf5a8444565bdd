"""The Wilson score interval, as the metric views compute it, the two-proportion z-test
that decides whether a week-over-week change is called, and the comparison of two packing
strategies on a sweep: the difference in accuracy with its score interval, paired by case
(Tango) or not (Mee), the test behind the verdict (McNemar's, or the same z-test), and how
many more cases would decide it.

The SQL macros ``wilson_low`` and ``wilson_high`` (schemas/sql/views/01_helpers.sql) are the
definition; every interval midtrace shows comes from a view. This is their one Python copy,
for a frame no view returns (the dashboard's constraint recall by week, summed over context
buckets). It repeats the macros' arithmetic in the same order, so both give the same float
(tests/test_stats.py runs the macro beside it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

# The macros' z, written as they write it: a longer constant would move the last digits.
Z95 = 1.959964


def wilson(successes: float, n: float) -> tuple[float | None, float | None]:
    """The 95% Wilson interval ``(low, high)`` of ``successes`` out of ``n``; ``(None, None)``
    when ``n`` is 0, like the macros' NULL."""
    if not n > 0:
        return None, None
    p = successes / n
    centre = p + Z95 ** 2 / (2 * n)
    spread = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n))
    denom = 1 + Z95 ** 2 / n
    return max(0.0, (centre - spread) / denom), min(1.0, (centre + spread) / denom)


SIGNIFICANCE = 0.05
"""A change is called (coloured better or worse, listed as a finding) when p < this."""


def two_proportion_test(x1: float, n1: float, x2: float, n2: float) -> tuple[float | None, float | None]:
    """The pooled two-proportion z-test of the change from ``x1/n1`` to ``x2/n2``:
    ``(z, two-sided p)``, z positive when the second proportion is higher; ``(None, None)``
    when either n is 0. Both proportions 0 or both 1: no change, ``(0.0, 1.0)``."""
    if not (n1 > 0 and n2 > 0):
        return None, None
    p1, p2 = x1 / n1, x2 / n2
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:
        return 0.0, 1.0
    z = (p2 - p1) / se
    return z, math.erfc(abs(z) / math.sqrt(2))


# --- two strategies compared (docs/metrics.md, "Comparing two strategies") -------------------

Z80 = 0.841621
"""z of 80% power, the power behind "how many more cases would decide it"."""

_STEPS = 200  # bisection halvings: far below a float's resolution on [-1, 1]


def _bisect(f: Any, lo: float, hi: float) -> float:
    """The root of ``f``, decreasing on ``[lo, hi]``, with ``f(lo) >= 0 >= f(hi)``."""
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _invert(score: Any, estimate: float) -> tuple[float, float]:
    """The 95% interval of a difference: every delta whose score statistic (decreasing in
    delta, 0 at the estimate) lies within +-Z95. An end reaches -1 or 1 when the statistic
    never leaves the band on that side."""
    eps = 1e-12
    low = -1.0 if estimate <= -1 or score(-1 + eps) <= Z95 else _bisect(
        lambda d: score(d) - Z95, -1 + eps, estimate)
    high = 1.0 if estimate >= 1 or score(1 - eps) >= -Z95 else _bisect(
        lambda d: score(d) + Z95, estimate, 1 - eps)
    return max(-1.0, low), min(1.0, high)


def _ratio(numerator: float, variance: float) -> float:
    if variance > 0:
        return numerator / math.sqrt(variance)
    return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)


def paired_difference(only_a: int, only_b: int, n: int) -> tuple[float | None, float | None,
                                                                  float | None]:
    """Accuracy of B minus accuracy of A over ``n`` pairs (the same case answered under both),
    where ``only_a`` pairs were right under A alone and ``only_b`` under B alone:
    ``(difference, low, high)``, the 95% interval Tango's score interval (Tango 1998), the
    set of differences McNemar's score statistic does not reject, so it excludes 0 exactly
    when :func:`mcnemar_test` gives p < 0.05. ``(None, None, None)`` when ``n`` is 0."""
    if not n > 0:
        return None, None, None
    b, c = float(only_a), float(only_b)

    def score(delta: float) -> float:
        # the ML estimate of P(right under A alone) given the difference delta: the root of
        # 2n q^2 - w q - b delta (1 - delta) = 0, w = b + c - delta (2n + b - c)
        w = b + c - delta * (2 * n + b - c)
        q = (w + math.sqrt(max(0.0, w * w + 8 * n * b * delta * (1 - delta)))) / (4 * n)
        return _ratio(c - b - n * delta, n * (2 * q + delta * (1 - delta)))

    estimate = (c - b) / n
    return (estimate, *_invert(score, estimate))


def mcnemar_test(only_a: int, only_b: int) -> tuple[float | None, float | None]:
    """McNemar's test of paired outcomes (no continuity correction): ``(z, two-sided p)``,
    z = (only_b - only_a) / sqrt(only_a + only_b), positive when B is right more often. No
    discordant pair: no difference seen, ``(0.0, 1.0)``."""
    if only_a < 0 or only_b < 0:
        return None, None
    if only_a + only_b == 0:
        return 0.0, 1.0
    z = (only_b - only_a) / math.sqrt(only_a + only_b)
    return z, math.erfc(abs(z) / math.sqrt(2))


def _restricted_p1(x1: float, n1: float, x2: float, n2: float, delta: float) -> float:
    """The ML estimate of p1 given p2 = p1 + delta: the root of the log-likelihood's
    derivative, which falls strictly between the bounds of p1."""
    lo, hi = max(0.0, -delta), min(1.0, 1.0 - delta)

    def slope(p: float) -> float:
        total = 0.0
        for k, m, q in ((x1, n1, p), (x2, n2, p + delta)):
            if k:
                total += k / q
            if m - k:
                total -= (m - k) / (1 - q)
        return total

    return _bisect(slope, lo, hi)


def unpaired_difference(x1: int, n1: int, x2: int, n2: int) -> tuple[float | None, float | None,
                                                                    float | None]:
    """Accuracy ``x2/n2`` minus ``x1/n1`` of two independent samples: ``(difference, low,
    high)``, the 95% interval Mee's score interval (Farrington-Manning's statistic, no
    n/(n-1) factor), the set of differences its score test does not reject; at 0 that test
    is :func:`two_proportion_test`, so the interval excludes 0 exactly when its p < 0.05.
    ``(None, None, None)`` when either n is 0."""
    if not (n1 > 0 and n2 > 0):
        return None, None, None
    p1, p2 = x1 / n1, x2 / n2

    def score(delta: float) -> float:
        q1 = _restricted_p1(x1, n1, x2, n2, delta)
        q2 = q1 + delta
        return _ratio(p2 - p1 - delta, q1 * (1 - q1) / n1 + q2 * (1 - q2) / n2)

    estimate = p2 - p1
    return (estimate, *_invert(score, estimate))


def paired_sample_size(only_a: int, only_b: int, n: int) -> float | None:
    """Pairs McNemar's test needs to call the difference seen in ``n`` pairs at p < 0.05 with
    80% power, taking the observed discordant shares as the truth (Connor 1987):
    ``(Z95 sqrt(psi) + Z80 sqrt(psi - d^2))^2 / d^2``, psi = (only_a + only_b) / n and
    d = (only_b - only_a) / n. None when no difference was seen (no n would call it)."""
    if not n > 0 or only_a == only_b:
        return None
    psi, d = (only_a + only_b) / n, (only_b - only_a) / n
    return (Z95 * math.sqrt(psi) + Z80 * math.sqrt(max(0.0, psi - d * d))) ** 2 / (d * d)


def unpaired_sample_size(p1: float, p2: float) -> float | None:
    """Requests per strategy the two-proportion z-test needs to call a change from ``p1`` to
    ``p2`` at p < 0.05 with 80% power (Fleiss, no continuity correction):
    ``(Z95 sqrt(2 pbar (1 - pbar)) + Z80 sqrt(p1 (1 - p1) + p2 (1 - p2)))^2 / (p2 - p1)^2``,
    pbar = (p1 + p2) / 2. None when they are equal."""
    if p1 == p2:
        return None
    pbar = (p1 + p2) / 2
    return (Z95 * math.sqrt(2 * pbar * (1 - pbar))
            + Z80 * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / (p2 - p1) ** 2


def weighted_accuracy(strata: Iterable[tuple[float, float, float]]) -> tuple[
        float | None, float | None, float | None]:
    """A weighted average of per-stratum accuracies, ``strata`` = (weight, correct, n):
    ``(average, low, high)``. Weights are normalised over the strata with n > 0. The
    interval is normal: average +- Z95 sqrt(sum w^2 pt (1 - pt) / nt), with each stratum's
    pt = (correct + Z95^2/2) / nt, nt = n + Z95^2 (Agresti-Coull's adjustment, so a stratum
    at 0% or 100% still carries variance), clamped to [0, 1]. None when no stratum has n."""
    rows = [(float(w), float(x), float(m)) for w, x, m in strata if m > 0 and w > 0]
    total = sum(w for w, _, _ in rows)
    if not rows or total <= 0:
        return None, None, None
    average = sum(w * x / m for w, x, m in rows) / total
    variance = 0.0
    for w, x, m in rows:
        nt = m + Z95 ** 2
        pt = (x + Z95 ** 2 / 2) / nt
        variance += (w / total) ** 2 * pt * (1 - pt) / nt
    spread = Z95 * math.sqrt(variance)
    return average, max(0.0, average - spread), min(1.0, average + spread)
