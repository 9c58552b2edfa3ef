"""Compare verdicts on fake repeats with known noise: seeded draws rescaled to an exact mean and CV."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.reporting.verdict import check_threshold, compare_repeats, rank_test


def known_noise(seed: int, n: int, mean: float, cv: float) -> list[float]:
    """n seeded normal draws rescaled so that their sample mean and CV are exactly `mean` and `cv`."""
    z = np.random.default_rng(seed).standard_normal(n)
    z = (z - z.mean()) / z.std(ddof=1)
    return list(mean * (1 + cv * z))


@pytest.mark.parametrize("seed", range(4))
def test_seven_percent_slowdown_at_half_percent_cv_is_slower(seed):
    """With 5 values at exact CV 0.5 %, every value is within 1.79 sd = 0.9 % of its mean (max |z| = 4/sqrt(5)),
    so every resampled ratio is at most 93.83 / 99.1 < 0.95, and the ranks separate completely: p = 2/252."""
    base = known_noise(seed, 5, 100.0, 0.005)
    new = known_noise(seed + 100, 5, 93.0, 0.005)
    verdict = compare_repeats(base, new, threshold=0.05)
    assert verdict.verdict == "slower", verdict.reason
    assert verdict.p_value == pytest.approx(2 / 252)
    assert verdict.ci_high < 0.95 and verdict.ratio == pytest.approx(np.median(new) / np.median(base))


@pytest.mark.parametrize("seed", range(4))
def test_three_repeats_at_eight_percent_cv_are_inconclusive(seed):
    """3 values at exact CV 8 % around 93: the largest is >= 93 x (1 + 0.08 / sqrt(3)) = 97.3 and the smallest
    <= 88.7, so the interval reaches above 0.95 and below it: neither slower nor the same."""
    base = known_noise(seed, 5, 100.0, 0.005)
    new = known_noise(seed + 100, 3, 93.0, 0.08)
    verdict = compare_repeats(base, new, threshold=0.05)
    assert verdict.verdict == "inconclusive", verdict.reason
    assert verdict.ci_low < 0.95 < verdict.ci_high


def test_same_faster_and_too_few():
    base = known_noise(1, 5, 100.0, 0.005)
    assert compare_repeats(base, known_noise(2, 5, 100.5, 0.005)).verdict == "same"
    faster = compare_repeats(base, known_noise(3, 5, 110.0, 0.005))
    assert faster.verdict == "faster" and faster.ci_low > 1.05
    few = compare_repeats(base[:2], base)
    assert few.verdict == "inconclusive" and "at least 3" in few.reason and few.p_value is None
    three_a_side = compare_repeats([100.0, 100.1, 99.9], [90.0, 90.1, 89.9])  # 10 % slower, but 3 vs 3
    assert three_a_side.verdict == "inconclusive" and "cannot tell" in three_a_side.reason
    assert three_a_side.p_value == pytest.approx(0.1)  # the smallest two-sided p of 3 vs 3 is 2/20


def test_deterministic_and_threshold_checked():
    base, new = known_noise(5, 4, 100.0, 0.02), known_noise(6, 4, 96.0, 0.02)
    assert compare_repeats(base, new) == compare_repeats(base, new)
    assert rank_test([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0
    for bad in (-0.1, 1.0, 5.0):
        with pytest.raises(ValueError, match="--threshold"):
            check_threshold(bad)
