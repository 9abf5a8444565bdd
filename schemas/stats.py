"""The Wilson score interval, as the metric views compute it.

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
