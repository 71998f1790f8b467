"""Summary statistics shared by the server's /metrics, the benchmarks and the eval reports."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence: a value that was observed,
    the smallest with at least q% of the values at or below it."""
    if not values:
        raise ValueError("a percentile of no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]
