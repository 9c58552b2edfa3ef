"""Summary statistics of repeats and of per-step latencies, in one place so every report agrees."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Two-sided 95 % Student t quantiles for 1..30 degrees of freedom; beyond, the normal 1.96 is close enough.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 100]."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lower = math.floor(pos)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (pos - lower)


def latency_summary(step_ms: Sequence[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(step_ms),
        "p50": percentile(step_ms, 50),
        "p90": percentile(step_ms, 90),
    }


def spread(values: Sequence[float]) -> dict[str, float | None]:
    """Median, mean, extremes, coefficient of variation and a 95 % confidence half-width of the mean."""
    n = len(values)
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if n > 1 else 0.0
    t95 = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    ci95 = t95 * stdev / math.sqrt(n) if n > 1 else None
    return {
        "median": statistics.median(values),
        "mean": mean,
        "min": min(values),
        "max": max(values),
        "stdev": stdev,
        "cv": stdev / mean if mean else None,
        "ci95": ci95,
    }
