"""Median intervals, the adaptive-repeat rule and outliers, against hand computations and seeded fake repeats."""

from __future__ import annotations

import numpy as np
import pytest

from dlperf.metrics.repeats import median_ci_exact, outliers, should_stop


def test_exact_interval_ranks_by_hand():
    values = list(range(1, 21))  # n = 20: ranks 6 and 15, coverage 1 - 2 P(B(20, 1/2) <= 5) = 0.9586
    ci = median_ci_exact(values)
    assert (ci.low, ci.high) == (6, 15)
    assert ci.coverage == pytest.approx(1 - 2 * 21700 / 2**20)
    six = median_ci_exact([5.0, 1.0, 3.0, 2.0, 6.0, 4.0])  # n = 6: [min, max], coverage 1 - 2/64
    assert (six.low, six.high, six.median) == (1.0, 6.0, 3.5)
    assert six.coverage == pytest.approx(1 - 2 / 64)
    assert six.half_width == pytest.approx(2.5 / 3.5)
    five = median_ci_exact([1.0, 2.0, 3.0, 4.0, 5.0])  # [min, max] covers only 93.75 %
    assert five.low is None and five.half_width is None and "too few" in five.reason
    assert median_ci_exact([1.0, 2.0, 3.0, 4.0, 5.0], confidence=0.9).low == 1.0


def _run_until_stop(rng: np.random.Generator, cv: float, **rule) -> tuple[int, str]:
    values: list[float] = []
    while True:
        values.append(float(rng.normal(100.0, 100.0 * cv)))
        decision = should_stop(values, **rule)
        if decision.stop:
            return decision.repeats, decision.reason


def test_adaptive_stop_quiet_and_noisy():
    repeats, reason = _run_until_stop(np.random.default_rng(0), cv=0.002, target_ci=0.01, max_repeats=10)
    assert repeats == 6 and "within the target" in reason  # the first n with an exact 95 % interval
    repeats, reason = _run_until_stop(np.random.default_rng(0), cv=0.08, target_ci=0.01, max_repeats=8)
    assert repeats == 8 and "--max-repeats 8 reached" in reason
    assert not should_stop([100.0, 100.0]).stop  # fewer than 3
    assert should_stop([100.0, 100.0, 100.0], confidence=0.75).stop  # [min, max] of 3 is a 75 % interval
    with pytest.raises(ValueError):
        should_stop([1.0], max_repeats=2)


def test_outliers_three_scaled_mads():
    # median 100.5; absolute deviations 0.5, 0.5, 1.5, 0, 29.5 -> MAD 0.5, scaled 0.5 x 1.4826 = 0.741; limit 2.22
    assert outliers([100.0, 101.0, 99.0, 100.5, 130.0]) == [False, False, False, False, True]
    assert outliers([100.0, 100.0, 50.0]) == [False, False, True]  # MAD 0: anything off the median
    assert outliers([100.0, 50.0]) == [False, False]  # too few to judge
