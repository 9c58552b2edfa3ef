"""Whether the window's first kept lines are past the warm-up, by measurement: the project's steady-state test
(metrics/steady.py: K consecutive lines each within the tolerance of their median) on the rates of the first
SETTLE_LINES kept lines. A format's warm-up is a count (torchtitan drops step 1 only, yet its step 2 is often still
warming up: 4x slower in GB200 runs); where the lines settle later than the count, the record says so and which
--warmup leaves the unsettled lines out. The figure is not changed: the framework's own practice stays the rule."""

from __future__ import annotations

from dlperf.metrics.steady import DEFAULT_TOLERANCE, DEFAULT_WINDOWS, windows_stable

SETTLE_LINES = 8  # the first kept lines looked at: a warm-up longer than this is not the count's slip


def line_rate(speed: float | None, seconds: float | None, batch: float | None) -> float | None:
    """A kept line's rate for the test: its printed speed, else its work over its time per iteration."""
    if speed is not None and speed > 0:
        return speed
    if seconds is not None and seconds > 0:
        return (batch or 1.0) / seconds
    return None


def settle_note(early: list[tuple[int | None, float]], warmup: int) -> str | None:
    """Where the first kept lines (step, rate) settle later than the warm-up count: the note saying so; None where
    the first K already agree, or too few lines (fewer than K + 1) to tell."""
    rates = [rate for _, rate in early]
    if len(rates) <= DEFAULT_WINDOWS:
        return None
    settled = next((i for i in range(len(rates) - DEFAULT_WINDOWS + 1) if _stable(rates, i)), None)
    band = f"{DEFAULT_WINDOWS} lines within +-{DEFAULT_TOLERANCE:.0%} of their median"
    if settled is None:
        return (
            f"the first {len(rates)} kept lines' step times do not settle (the steady-state test: {band}): the "
            f"window may hold warm-up past the {warmup}-iteration count"
        )
    if settled == 0:
        return None
    step = early[settled - 1][0]
    steady = sorted(rates[settled : settled + DEFAULT_WINDOWS])[DEFAULT_WINDOWS // 2]
    off = max(rates[:settled], key=lambda r: abs(r / steady - 1)) / steady - 1
    return (
        f"the step times settle only after the first {settled} kept line(s) (the steady-state test: {band}): "
        f"those, to iteration {step}, run up to {off:+.0%} against the steady lines and are in the window; "
        f"--warmup {step} leaves them out (the {warmup}-iteration warm-up is the format's count)"
    )


def _stable(rates: list[float], i: int) -> bool:
    return windows_stable(rates[i : i + DEFAULT_WINDOWS], DEFAULT_TOLERANCE)
