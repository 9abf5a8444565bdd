"""The Wilson score interval, as the metric views compute it, and the two-proportion z-test
that decides whether a week-over-week change is called.

The SQL macros ``wilson_low`` and ``wilson_high`` (schemas/sql/views/01_helpers.sql) are the
definition; every interval midtrace shows comes from a view. This is their one Python copy,
for a frame no view returns (the dashboard's constraint recall by week, summed over context
buckets). It repeats the macros' arithmetic in the same order, so both give the same float
(tests/test_stats.py runs the macro beside it).
"""

from __future__ import annotations

import math

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
