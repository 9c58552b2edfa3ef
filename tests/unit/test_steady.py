"""Steady-state detection on constructed window series with a known change point."""

from __future__ import annotations

import statistics

import pytest

from dlperf.metrics.steady import detect_steady_state, is_stable

# Ramp-up for three windows, stationary from the fourth (index 3) on.
RAMP = [20.0, 45.0, 70.0, 98.0, 100.0, 101.0, 99.0, 100.0, 100.0]
# The windows of a loaded 2-core machine, as reported in the issue.
NOISY = [53.7, 20.1, 5.7, 57.0, 7.2, 5.3]


def test_change_point_found_and_steady_throughput_by_hand():
    steady = detect_steady_state(RAMP, window_iters=10, first_iter=5, samples_per_iter=8)
    assert steady.stable and steady.window_index == 3
    assert steady.iteration == 5 + 3 * 10
    kept = RAMP[3:]
    # 6 windows x 80 samples over the sum of each window's 80 / throughput seconds
    assert steady.throughput == pytest.approx(6 * 80 / sum(80 / w for w in kept))
    assert steady.throughput == pytest.approx(statistics.harmonic_mean(kept))
    assert steady.windows_used == 6


def test_unequal_windows_weight_by_samples():
    steady = detect_steady_state([10.0, 100.0, 100.0, 50.0], window_iters=[4, 4, 4, 2], tolerance=0.5, windows=2)
    assert steady.window_index == 1 and steady.iteration == 4
    assert steady.throughput == pytest.approx((4 + 4 + 2) / (4 / 100 + 4 / 100 + 2 / 50))


def test_never_stable_is_explicit():
    steady = detect_steady_state(NOISY, window_iters=20)
    assert not steady.stable
    assert steady.throughput is None and steady.iteration is None
    assert "never stable" in steady.reason and "6 windows" in steady.reason
    assert detect_steady_state([100.0, 101.0], window_iters=20).stable is False  # fewer windows than K


def test_slow_drift_is_not_stable_against_the_median():
    drift = [100.0 * 1.04**i for i in range(5)]  # each window 4 % above the last: successive pairs all within 5 %
    assert not detect_steady_state(drift, window_iters=10, windows=5).stable
    assert detect_steady_state([100.0, 104.0, 99.0, 101.0, 103.0], window_iters=10, windows=5).stable


def test_online_check_for_auto_warmup():
    assert not is_stable(RAMP[:2])  # fewer than K windows so far
    assert not is_stable(RAMP[:4])  # 45, 70, 98
    assert not is_stable(RAMP[:5])  # 70, 98, 100: 70 is 29 % below the median
    assert is_stable(RAMP[:6])  # 98, 100, 101
    assert not is_stable(NOISY)
    with pytest.raises(ValueError):
        is_stable(RAMP, tolerance=0.0)
