"""Compare verdicts on fake repeats with known noise: seeded draws rescaled to an exact mean and CV, and repeats of
timed windows drawn from the two-level model (noise between repeats, noise between windows of one repeat)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, ttest_ind

from dlperf.reporting.verdict import check_threshold, compare_repeats, nested_test


def known_noise(seed: int, n: int, mean: float, cv: float) -> list[float]:
    """n seeded normal draws rescaled so that their sample mean and CV are exactly `mean` and `cv`."""
    z = np.random.default_rng(seed).standard_normal(n)
    z = (z - z.mean()) / z.std(ddof=1)
    return list(mean * (1 + cv * z))


def one_window(speeds: list[float]) -> list[list[float]]:
    """Repeats with one figure each (a framework log's throughput, or the history's)."""
    return [[s] for s in speeds]


def runs(rng: np.random.Generator, repeats: int, windows: int, mean: float, cv_between: float, cv_within: float):
    """Repeats of timed windows: each repeat's level log-normal about `mean` (cv_between), its windows about it."""
    levels = mean * np.exp(cv_between * rng.standard_normal(repeats))
    return [list(level * np.exp(cv_within * rng.standard_normal(windows))) for level in levels]


@pytest.mark.parametrize("seed", range(4))
def test_seven_percent_slowdown_at_half_percent_cv_is_slower(seed):
    """5 values a side at exact CV 0.5 %: se of the log ratio <= 0.005 x sqrt(2/5) x 1.01, t(8) = 2.306, so the
    interval's top is below 0.93 x exp(0.0074) = 0.937 < 0.95."""
    base = known_noise(seed, 5, 100.0, 0.005)
    new = known_noise(seed + 100, 5, 93.0, 0.005)
    verdict = compare_repeats(one_window(base), one_window(new), threshold=0.05)
    assert verdict.verdict == "slower", verdict.reason
    assert verdict.ci_high < 0.95 and verdict.df == 8
    assert verdict.ratio == pytest.approx(93.0 / 100.0, rel=1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_three_repeats_at_eight_percent_cv_are_inconclusive(seed):
    """3 values at CV 8 % around 93 against 5 at 0.5 %: pooled s ~ sqrt((4 x 0.005^2 + 2 x 0.08^2) / 6) = 0.065,
    se = s x sqrt(1/5 + 1/3) = 0.048, t(6) x se = 0.117: the interval ~ [0.83, 1.05] reaches both sides of 0.95."""
    base = known_noise(seed, 5, 100.0, 0.005)
    new = known_noise(seed + 100, 3, 93.0, 0.08)
    verdict = compare_repeats(one_window(base), one_window(new), threshold=0.05)
    assert verdict.verdict == "inconclusive", verdict.reason
    assert verdict.ci_low < 0.95 < verdict.ci_high


def test_same_faster_and_too_few():
    base = one_window(known_noise(1, 5, 100.0, 0.005))
    assert compare_repeats(base, one_window(known_noise(2, 5, 100.5, 0.005))).verdict == "same"
    faster = compare_repeats(base, one_window(known_noise(3, 5, 110.0, 0.005)))
    assert faster.verdict == "faster" and faster.ci_low > 1.05
    few = compare_repeats(base[:2], base)
    assert few.verdict == "inconclusive" and "at least 3" in few.reason and few.p_value is None
    one_each = compare_repeats([[100.0, 100.0]], [[50.0]])
    assert one_each.verdict == "inconclusive" and one_each.ratio == pytest.approx(0.5)
    # 10 % slower with 3 repeats a side at 0.1 %: the rank test this replaced could never say so (p >= 0.1)
    three_a_side = compare_repeats(one_window([100.0, 100.1, 99.9]), one_window([90.0, 90.1, 89.9]))
    assert three_a_side.verdict == "slower" and three_a_side.p_value < 1e-5


def test_nested_test_against_a_hand_computation():
    """Repeat means of log windows, pooled between-repeat variance: the same p as Student's t test (pooled) on the
    repeat means, computed here by scipy; the window noise by hand."""
    base = [[100.0, 110.0], [95.0, 105.0, 100.0], [102.0, 98.0]]
    new = [[60.0, 50.0], [52.0, 48.0], [55.0, 45.0, 50.0]]
    means = [[np.mean(np.log(r)) for r in side] for side in (base, new)]
    expected = ttest_ind(means[1], means[0], equal_var=True)
    test = nested_test(base, new)
    assert test.log_ratio == pytest.approx(np.mean(means[1]) - np.mean(means[0]))
    assert test.p_value() == pytest.approx(expected.pvalue) and test.df == 4
    residuals = [(math.log(w) - m) ** 2 for side, ms in zip((base, new), means) for r, m in zip(side, ms) for w in r]
    assert test.sd_within == pytest.approx(math.sqrt(sum(residuals) / (14 - 6)))
    verdict = compare_repeats(base, new)
    assert verdict.verdict == "slower" and (verdict.windows_base, verdict.windows_new) == (7, 7)


def test_two_x_slowdown_with_three_repeats_of_windows_is_slower():
    """The main job's case: 3 repeats of 4 windows a side, 5 % noise between repeats and 10 % between windows."""
    rng = np.random.default_rng(7)
    base = runs(rng, 3, 4, 115.0, 0.05, 0.10)
    new = runs(rng, 3, 4, 57.5, 0.05, 0.10)
    verdict = compare_repeats(base, new)
    assert verdict.verdict == "slower", verdict.reason
    assert verdict.ci_high < 0.95 and 0.4 < verdict.ratio < 0.6
    assert compare_repeats(new, base).verdict == "faster"


def test_false_alarms_at_the_stated_rate():
    """1000 seeded compares of 3 against 3 repeats (5 windows each) drawn from one distribution. At threshold 0 the
    slower-or-faster fraction is the test's alpha, 5 %: it lies within the binomial 99.9 % bounds of 1000 draws at
    5 %; at the default 5 % threshold (3 % noise between repeats) false alarms are rarer still."""
    rng = np.random.default_rng(2026)
    draws = [(runs(rng, 3, 5, 100.0, 0.03, 0.05), runs(rng, 3, 5, 100.0, 0.03, 0.05)) for _ in range(1000)]
    low, high = binom.interval(0.999, len(draws), 0.05)
    alarms = {
        threshold: sum(compare_repeats(b, n, threshold).verdict in ("slower", "faster") for b, n in draws)
        for threshold in (0.0, 0.05)
    }
    assert low <= alarms[0.0] <= high, alarms
    assert alarms[0.05] < low, alarms


def test_deterministic_and_threshold_checked():
    base, new = one_window(known_noise(5, 4, 100.0, 0.02)), one_window(known_noise(6, 4, 96.0, 0.02))
    assert compare_repeats(base, new) == compare_repeats(base, new)
    same = compare_repeats(one_window([1.0, 1.0, 1.0]), one_window([1.0, 1.0, 1.0]))
    assert same.verdict == "same" and same.p_value == 1.0
    for bad in (-0.1, 1.0, 5.0):
        with pytest.raises(ValueError, match="--threshold"):
            check_threshold(bad)
