"""Is NEW faster, slower or the same as BASE, given the noise of their repeats and of the windows inside them?
One decision rule, deterministic.

The evidence is every timed window of every good repeat on both sides: y = log(samples/s of a window). The model is
the two-level (mixed) model of a benchmark, y = side effect + repeat effect + window noise, with the repeat effect
random (each run lands on its own machine state: clocks, placement, other load) and the window noise random within a
run. Its test of the side effect is the nested-ANOVA t test (what a REML mixed model gives for balanced data):
- each repeat's mean log throughput over its windows, so a repeat's figure is as precise as its windows make it;
- d = mean of NEW's repeat means - mean of BASE's, the log of the ratio of geometric means, r = exp(d);
- s^2 = the two sides' variance of repeat means about their side's mean, pooled (R_base + R_new - 2 degrees of
  freedom): the noise between repeats, which already holds the windows' noise divided by their count;
- se = s * sqrt(1/R_base + 1/R_new); t = d / se; two-sided p from Student's t; 95 % interval exp(d +- t_0.975 se).
The degrees of freedom come from repeats, not windows: the windows of one run share its machine state, so they say
how precise that run's mean is, not how far the next run's will fall (counting windows as independent evidence would
call every machine-state change a regression). The windows also split the noise into its two levels: `cv_within`
(between windows of one repeat) and `cv_between` (between repeats beyond what their windows explain), reported, so a
user sees whether longer runs or more repeats would narrow the interval.

Verdict at threshold t (a fraction) and alpha = 0.05:
- `inconclusive` when a side has fewer than 3 repeats;
- `slower` when high < 1 - t (so also p < alpha): the whole interval is beyond the threshold;
- `faster` when low > 1 + t;
- `same` when the whole interval lies within [1 - t, 1 + t]: any change is smaller than the threshold;
- `inconclusive` otherwise: the interval straddles a threshold.
Under no change the chance of `slower` or `faster` is at most alpha (exactly alpha at t = 0, far less at 5 %);
`benchmarks/compare_false_alarms.py` counts the verdicts over many compares of repeated runs of the same code, and
docs/compare.md gives the power for 3 against 3 repeats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

VERDICTS = ("faster", "slower", "same", "inconclusive")
DEFAULT_THRESHOLD = 0.05
ALPHA = 0.05
CONFIDENCE = 0.95
MIN_REPEATS = 3

Repeat = Sequence[float]  # one repeat's window throughputs (its throughput alone where it has no windows)


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
    windows_base: int = 0
    windows_new: int = 0
    cv_within: float | None = None
    cv_between: float | None = None
    df: int | None = None


@dataclass(frozen=True)
class NestedTest:
    """The side effect of the two-level model: log ratio, its standard error and degrees of freedom, and the
    noise at each level (standard deviations of log throughput, about the CV)."""

    log_ratio: float
    se: float
    df: int
    sd_within: float | None
    sd_between: float

    def p_value(self) -> float:
        from scipy.special import stdtr  # Student's t distribution function (scipy.stats.t's, without its overhead)

        if self.se == 0:
            return 1.0 if self.log_ratio == 0 else 0.0
        return float(2 * stdtr(self.df, -abs(self.log_ratio) / self.se))

    def interval(self) -> tuple[float, float]:
        from scipy.special import stdtrit  # its inverse

        half = float(stdtrit(self.df, 0.5 + CONFIDENCE / 2)) * self.se
        return math.exp(self.log_ratio - half), math.exp(self.log_ratio + half)


def check_threshold(threshold: float) -> float:
    """A threshold is a fraction in [0, 1); ValueError otherwise (the CLI turns it into one line)."""
    if not 0 <= threshold < 1:
        raise ValueError(f"--threshold must be a fraction in [0, 1) such as 0.05 for 5 %, got {threshold}")
    return threshold


def _logs(repeat: Repeat) -> list[float]:
    return [math.log(w) for w in repeat if w is not None and math.isfinite(w) and w > 0]


def _centre(side: Sequence[Repeat]) -> float:
    means = [sum(logs) / len(logs) for r in side if (logs := _logs(r))]
    return sum(means) / len(means)


def side_mean(side: Sequence[Repeat]) -> float | None:
    """The figure a side's part of the ratio is: the geometric mean over its repeats of each repeat's geometric
    mean over its windows (None without a positive window). NEW's over BASE's is the verdict's ratio exactly, so
    a table that prints these beside the ratio never points the other way (medians can)."""
    kept = [r for r in side if _logs(r)]
    return math.exp(_centre(kept)) if kept else None


def _between(means: list[list[float]]) -> tuple[float, int]:
    """The pooled variance of repeat means about their side's mean, and its degrees of freedom."""
    centres = [sum(m) / len(m) for m in means]
    df = sum(len(m) for m in means) - 2
    return sum((x - c) ** 2 for m, c in zip(means, centres) for x in m) / df, df


def _within(sides: list[list[list[float]]], means: list[list[float]]) -> float | None:
    """The pooled variance of windows about their repeat's mean; None where every repeat has one window."""
    within = [(y - mu) ** 2 for side, m in zip(sides, means) for r, mu in zip(side, m) for y in r]
    within_df = sum(len(r) - 1 for side in sides for r in side)
    return sum(within) / within_df if within_df else None


def _harmonic_windows(sides: list[list[list[float]]]) -> float:
    """The harmonic mean of the repeats' window counts: how many windows a repeat's mean averages."""
    windows = [len(r) for side in sides for r in side]
    return len(windows) / sum(1 / n for n in windows)


def nested_test(base: Sequence[Repeat], new: Sequence[Repeat]) -> NestedTest:
    """The nested-ANOVA test of NEW against BASE: each side at least one repeat with a positive window, three in
    all (one degree of freedom)."""
    sides = [[logs for r in side if (logs := _logs(r))] for side in (base, new)]
    means = [[sum(r) / len(r) for r in side] for side in sides]
    var_between, df = _between(means)
    var_within = _within(sides, means)
    s = math.sqrt(var_between)
    excess = s**2 - (var_within or 0.0) / _harmonic_windows(sides)  # between repeats beyond their windows' noise
    return NestedTest(
        _centre(new) - _centre(base),
        s * math.sqrt(sum(1 / len(m) for m in means)),
        df,
        None if var_within is None else math.sqrt(var_within),
        math.sqrt(max(excess, 0.0)),
    )


def _decide(low: float, high: float, p: float, threshold: float) -> tuple[str, str]:
    """(verdict, why) from the ratio's interval and p value at `threshold`."""
    if high < 1 - threshold:
        return "slower", f"slower by more than {threshold:.0%}"
    if low > 1 + threshold:
        return "faster", f"faster by more than {threshold:.0%}"
    if low >= 1 - threshold and high <= 1 + threshold:
        return "same", f"within ±{threshold:.0%}"
    if p >= ALPHA:
        return (
            "inconclusive",
            f"no significant difference at {ALPHA:.0%}, but the interval reaches past ±{threshold:.0%}",
        )
    return "inconclusive", f"the interval straddles the ±{threshold:.0%} threshold: more repeats needed"


def compare_repeats(base: Sequence[Repeat], new: Sequence[Repeat], threshold: float = DEFAULT_THRESHOLD) -> Verdict:
    """The verdict for one case from its repeats' window throughputs (higher is better) on both sides."""
    check_threshold(threshold)
    base = [r for r in base if _logs(r)]
    new = [r for r in new if _logs(r)]
    n_base, n_new = len(base), len(new)
    counts = (sum(len(_logs(r)) for r in base), sum(len(_logs(r)) for r in new))
    if min(n_base, n_new) < MIN_REPEATS:
        ratio = math.exp(_centre(new) - _centre(base)) if base and new else None
        reason = f"{n_base} vs {n_new} repeats: at least {MIN_REPEATS} a side are needed"
        return Verdict("inconclusive", reason, ratio, None, None, None, n_base, n_new, threshold, *counts)
    test = nested_test(base, new)
    ratio = math.exp(test.log_ratio)
    low, high = test.interval()
    p = test.p_value()
    interval = (
        f"ratio {ratio:.3f}, 95 % interval [{low:.3f}, {high:.3f}], p = {p:.3g} "
        f"({n_base} vs {n_new} repeats, {counts[0]} vs {counts[1]} windows)"
    )
    verdict, why = _decide(low, high, p, threshold)
    return Verdict(
        verdict,
        f"{why}: {interval}",
        ratio,
        low,
        high,
        p,
        n_base,
        n_new,
        threshold,
        *counts,
        test.sd_within,
        test.sd_between,
        test.df,
    )
