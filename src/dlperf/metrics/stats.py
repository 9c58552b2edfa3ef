"""Summary statistics of repeats and of per-step latencies, in one place so every report agrees."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]: numpy's "linear" method, computed as numpy computes it (the
    same float), without importing numpy into every process that writes or shows a record (0.1 to 0.2 s)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(float(v) for v in values)
    at = (len(ordered) - 1) * (q / 100)
    below = math.floor(at)
    low, high = ordered[below], ordered[min(below + 1, len(ordered) - 1)]
    gamma = at - below
    return high - (high - low) * (1 - gamma) if gamma >= 0.5 else low + (high - low) * gamma


def t95(dof: int) -> float:
    """The two-sided 95 % Student t quantile for `dof` degrees of freedom (scipy loads on use: reports start fast)."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(0.975, dof))


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
    ci95 = t95(n - 1) * stdev / math.sqrt(n) if n > 1 else None
    return {
        "median": statistics.median(values),
        "mean": mean,
        "min": min(values),
        "max": max(values),
        "stdev": stdev,
        "cv": stdev / mean if mean else None,
        "ci95": ci95,
    }
