"""Where a run's window throughputs become stationary, instead of trusting a guessed warm-up.

The rule (one predicate, used both after the run and online by `--warmup-iters auto`):

    K consecutive windows are *stable* when every one of them lies within +-tolerance (relative) of their median.

The steady state starts at the first window that opens such a run of K stable windows; the steady throughput is
taken over that window and every window after it (dropping later slow windows would be cherry-picking). It is
samples over time, i.e. the harmonic mean of the window throughputs weighted by each window's samples. A run with
no K stable windows is *never stable*: an explicit result with the reason, never a silent average.

Defaults: K = 3 windows, tolerance 5 %. A quiet GPU run's windows of 20 steps agree within about 1 %; the 5 %
band accepts a quiet CPU run and still rejects the "53.7, 20.1, 5.7, 57.0" windows of a loaded 2-core machine.
Comparing with the median rather than successive pairs keeps a slow drift (each window 2 % above the last) from
passing as stable.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from dlperf.records.parts import SteadyState

DEFAULT_TOLERANCE = 0.05
DEFAULT_WINDOWS = 3


def _check(tolerance: float, windows: int) -> None:
    if not 0 < tolerance < 1:
        raise ValueError(f"steady-state tolerance must be in (0, 1), got {tolerance}")
    if windows < 2:
        raise ValueError(f"steady state needs at least 2 windows to compare, got {windows}")


def windows_stable(window_throughputs: Sequence[float], tolerance: float = DEFAULT_TOLERANCE) -> bool:
    """All of these windows within +-tolerance of their median (the stability predicate)."""
    median = statistics.median(window_throughputs)
    return median > 0 and all(abs(w - median) <= tolerance * median for w in window_throughputs)


def is_stable(
    window_throughputs: Sequence[float], tolerance: float = DEFAULT_TOLERANCE, windows: int = DEFAULT_WINDOWS
) -> bool:
    """Online check for `--warmup-iters auto`: are the last `windows` windows so far stable?"""
    _check(tolerance, windows)
    return len(window_throughputs) >= windows and windows_stable(window_throughputs[-windows:], tolerance)


def detect_steady_state(
    window_throughputs: Sequence[float],
    window_iters: int | Sequence[int],
    first_iter: int = 0,
    samples_per_iter: float = 1.0,
    tolerance: float = DEFAULT_TOLERANCE,
    windows: int = DEFAULT_WINDOWS,
) -> SteadyState:
    """Steady state of a finished run.

    `window_iters` is the iterations per window (one number, or one per window when the last is short);
    `first_iter` the iteration the first window starts at (the fixed warm-up), so `iteration` is absolute.
    `samples_per_iter` (the global batch) only weights the windows; it cancels when all windows are equal.
    """
    _check(tolerance, windows)
    n = len(window_throughputs)
    iters = [window_iters] * n if isinstance(window_iters, int) else list(window_iters)
    if len(iters) != n:
        raise ValueError(f"{n} window throughputs but {len(iters)} window lengths")
    for start in range(n - windows + 1):
        if windows_stable(window_throughputs[start : start + windows], tolerance):
            kept = range(start, n)
            samples = [iters[i] * samples_per_iter for i in kept]
            seconds = sum(s / window_throughputs[i] for s, i in zip(samples, kept))
            return SteadyState(
                stable=True,
                window_index=start,
                iteration=first_iter + sum(iters[:start]),
                throughput=sum(samples) / seconds,
                windows_used=len(kept),
                tolerance=tolerance,
                windows_required=windows,
            )
    reason = f"never stable: no {windows} consecutive windows within ±{tolerance:.0%} of their median among {n} windows"
    return SteadyState(False, None, None, None, 0, tolerance, windows, reason)
