"""How well the median of a case's repeats is known, when to stop repeating, and which repeats are outliers.

Confidence interval of a median: the distribution-free order-statistic interval [x_(k), x_(n+1-k)] with the
largest k whose coverage 1 - 2 P(Binom(n, 1/2) <= k - 1) is at least the confidence. It assumes nothing about the
spread, but needs enough repeats: at 95 % the smallest n is 6 (n = 5 reaches 93.75 % with [min, max]). (A
percentile bootstrap would give an interval with 3 to 5 repeats, but a narrower one than the truth, so none is.)

Adaptive repeats (`--repeats auto --target-ci PCT --max-repeats N`): repeat until the exact 95 % interval's
half-width, (high - low) / 2 over the median, is within the target, after at least 3 repeats; stop at N otherwise.
So with the default 95 % a case stops after 6 repeats at the earliest; the decision says why it stopped.

Outliers: a repeat more than 3 scaled MADs (MAD x 1.4826, the normal-consistent scale) from the median is flagged
and kept. When the MAD is 0 (most repeats identical) any repeat off the median is flagged.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlperf.records.parts import RepeatsStop

DEFAULT_CONFIDENCE = 0.95
DEFAULT_TARGET_CI = 0.01
MIN_REPEATS = 3
DEFAULT_MAX_REPEATS = 10
OUTLIER_MADS = 3.0


@dataclass(frozen=True)
class MedianInterval:
    median: float
    low: float | None
    high: float | None
    confidence: float
    coverage: float | None  # the interval's achieved coverage
    method: str  # "exact" (the order-statistic interval; recorded so a reader knows which)
    n: int
    reason: str | None = None  # why there is no interval

    @property
    def half_width(self) -> float | None:
        """(high - low) / 2 relative to the median; None without an interval."""
        if self.low is None or self.high is None or not self.median:
            return None
        return (self.high - self.low) / 2 / abs(self.median)


def median_ci_exact(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> MedianInterval:
    """The order-statistic interval of the median via the binomial distribution, or none with the reason."""
    from scipy.stats import binom

    ordered = sorted(values)
    n = len(ordered)
    median = statistics.median(ordered)
    best: tuple[int, float] | None = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * float(binom.cdf(k - 1, n, 0.5))
        if coverage < confidence:
            break
        best = (k, coverage)
    if best is None:
        reason = f"{n} repeats are too few for a distribution-free {confidence:.0%} interval of the median"
        return MedianInterval(median, None, None, confidence, None, "exact", n, reason)
    k, coverage = best
    return MedianInterval(median, ordered[k - 1], ordered[n - k], confidence, coverage, "exact", n)


def _check_rule(target_ci: float, max_repeats: int, min_repeats: int) -> None:
    if not 0 < target_ci < 1:
        raise ValueError(f"--target-ci must be a fraction in (0, 1), got {target_ci}")
    if max_repeats < min_repeats:
        raise ValueError(f"--max-repeats must be at least {min_repeats}, got {max_repeats}")


def should_stop(
    values: Sequence[float],
    target_ci: float = DEFAULT_TARGET_CI,
    max_repeats: int = DEFAULT_MAX_REPEATS,
    min_repeats: int = MIN_REPEATS,
    confidence: float = DEFAULT_CONFIDENCE,
) -> RepeatsStop:
    """The adaptive-repeat rule, given the throughputs of the good repeats so far."""
    _check_rule(target_ci, max_repeats, min_repeats)
    n = len(values)
    interval = median_ci_exact(values, confidence) if n else None
    half = interval.half_width if interval else None
    if n < min_repeats:
        return RepeatsStop(False, f"{n} of at least {min_repeats} repeats", n, half, target_ci)
    if half is not None and half <= target_ci:
        reason = f"{confidence:.0%} half-width of the median {half:.2%} within the target {target_ci:.2%} after {n}"
        return RepeatsStop(True, reason, n, half, target_ci)
    if n >= max_repeats:
        width = "no interval yet" if half is None else f"half-width {half:.2%}"
        reason = f"--max-repeats {max_repeats} reached with {width} (target {target_ci:.2%})"
        return RepeatsStop(True, reason, n, half, target_ci)
    width = interval.reason if half is None else f"half-width {half:.2%} above the target {target_ci:.2%}"
    return RepeatsStop(False, width, n, half, target_ci)


NORMAL_MAD = 1.482602218505602  # 1 / the standard normal's 75th percentile


def outliers(values: Sequence[float], mads: float = OUTLIER_MADS) -> list[bool]:
    """Per repeat: more than `mads` scaled MADs from the median (flag it, keep it). Fewer than 3 values: none.
    The MAD is scaled to a normal distribution's standard deviation (x 1 / Phi^-1(3/4)), as scipy's scale="normal";
    computed here so that reading records never loads scipy."""
    if len(values) < MIN_REPEATS:
        return [False] * len(values)
    median = statistics.median(values)
    scale = NORMAL_MAD * statistics.median(abs(v - median) for v in values)
    return [abs(v - median) > mads * scale for v in values]
