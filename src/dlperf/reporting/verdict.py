"""Is NEW faster, slower or the same as BASE, given the noise of their repeats? One decision rule, seeded.

Evidence, from the throughputs of the good repeats of one case on each side:
- the ratio r = median(NEW) / median(BASE), with a 95 % percentile-bootstrap interval [low, high] (each side
  resampled on its own, scipy.stats.bootstrap, fixed seed, so the same inputs give the same verdict);
- the two-sided Mann-Whitney U test of the two sets of repeats (scipy.stats.mannwhitneyu; exact for small
  samples without ties), p-value p.

Verdict at threshold t (a fraction) and alpha = 0.05:
- `inconclusive` when a side has fewer than 3 repeats;
- `slower` when high < 1 - t and p < alpha: the whole interval is beyond the threshold and the ranks differ;
- `faster` when low > 1 + t and p < alpha;
- `same` when the whole interval lies within [1 - t, 1 + t]: any change is smaller than the threshold;
- `inconclusive` otherwise: the interval straddles a threshold, or the rank test cannot tell (note that 3 vs 3
  or 3 vs 4 repeats can never reach p < 0.05 in a two-sided rank test; 4 vs 4 or 3 vs 5 can).

So a 7 % slowdown measured 5 times a side at 0.5 % spread is `slower` at 5 %, while 3 repeats at 8 % spread give an
interval too wide to say whether the change passes 5 %, and the verdict is `inconclusive`, not a false alarm.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

VERDICTS = ("faster", "slower", "same", "inconclusive")
DEFAULT_THRESHOLD = 0.05
ALPHA = 0.05
CONFIDENCE = 0.95
MIN_REPEATS = 3
SEED = 0
RESAMPLES = 10_000


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n_base: int
    n_new: int
    threshold: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def check_threshold(threshold: float) -> float:
    """A threshold is a fraction in [0, 1); ValueError otherwise (the CLI turns it into one line)."""
    if not 0 <= threshold < 1:
        raise ValueError(f"--threshold must be a fraction in [0, 1) such as 0.05 for 5 %, got {threshold}")
    return threshold


def ratio_interval(
    base: Sequence[float], new: Sequence[float], seed: int = SEED, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of median(new) / median(base), each side resampled independently."""
    import numpy as np
    from scipy.stats import bootstrap

    def ratio(b: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(n, axis=axis) / np.median(b, axis=axis)

    result = bootstrap(
        (np.asarray(base, dtype=float), np.asarray(new, dtype=float)),
        ratio,
        confidence_level=CONFIDENCE,
        n_resamples=resamples,
        method="percentile",
        paired=False,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def rank_test(base: Sequence[float], new: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 when every repeat is the same value (nothing to rank)."""
    from scipy.stats import mannwhitneyu

    if len(set(base) | set(new)) == 1:
        return 1.0
    return float(mannwhitneyu(new, base, alternative="two-sided").pvalue)


def compare_repeats(
    base: Sequence[float], new: Sequence[float], threshold: float = DEFAULT_THRESHOLD, seed: int = SEED
) -> Verdict:
    """The verdict for one case from its repeats' throughputs (higher is better) on both sides."""
    check_threshold(threshold)
    n_base, n_new = len(base), len(new)
    ratio = statistics.median(new) / statistics.median(base) if base and new else None
    if min(n_base, n_new) < MIN_REPEATS:
        reason = f"{n_base} vs {n_new} repeats: at least {MIN_REPEATS} a side are needed"
        return Verdict("inconclusive", reason, ratio, None, None, None, n_base, n_new, threshold)
    low, high = ratio_interval(base, new, seed)
    p = rank_test(base, new)
    interval = f"ratio {ratio:.3f}, 95 % interval [{low:.3f}, {high:.3f}], Mann-Whitney p = {p:.3g}"
    significant = p < ALPHA
    if high < 1 - threshold and significant:
        verdict, why = "slower", f"slower by more than {threshold:.0%}"
    elif low > 1 + threshold and significant:
        verdict, why = "faster", f"faster by more than {threshold:.0%}"
    elif low >= 1 - threshold and high <= 1 + threshold:
        verdict, why = "same", f"within ±{threshold:.0%}"
    elif not significant:
        verdict, why = "inconclusive", f"the rank test cannot tell them apart at {ALPHA:.0%} ({n_base} vs {n_new})"
    else:
        verdict, why = "inconclusive", f"the interval straddles the ±{threshold:.0%} threshold: more repeats needed"
    return Verdict(verdict, f"{why}: {interval}", ratio, low, high, p, n_base, n_new, threshold)
