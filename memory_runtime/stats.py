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


def roc_auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The area under the ROC curve: the chance that a positive scores above a negative (ties half), 0.5
    for a score that does not separate them; None without both."""
    if not positives or not negatives:
        return None
    import numpy as np

    a, b = np.asarray(positives, dtype=float)[:, None], np.asarray(negatives, dtype=float)[None, :]
    return float(np.mean(a > b) + 0.5 * np.mean(a == b))


def best_f1_threshold(scored: Sequence[tuple[float, bool]]) -> tuple[float, float]:
    """The threshold t (a score observed) that maximises F1 of "score >= t means positive", and that F1;
    (0.5, 0.0) without positives."""
    positives = sum(label for _, label in scored)
    if not positives:
        return 0.5, 0.0
    best = (0.5, 0.0)
    kept = right = 0
    ordered = sorted(scored, key=lambda x: -x[0])
    for i, (score, label) in enumerate(ordered):
        kept += 1
        right += label
        if i + 1 < len(ordered) and ordered[i + 1][0] == score:
            continue  # a threshold keeps every tie
        f1 = 2 * right / (kept + positives)
        if f1 > best[1]:
            best = (score, f1)
    return best
