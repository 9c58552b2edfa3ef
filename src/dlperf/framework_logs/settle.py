"""Where a run's steady window starts, by measurement: the project's steady-state test (metrics/steady.py: K
consecutive windows each within the tolerance of their median) on the rates of the first kept lines, in windows of
one line, else of the fewest lines whose windows settle (an accumulation cycle's swing, 102-298 ms in LitGPT's
micro-steps; the noise of the hook's single steps). A format's warm-up is a count (torchtitan drops step 1 only, yet
its step 2 is often still warming up: 4x slower in GB200 runs): the test starts there, and the lines before the
first steady window are warm-up too, left out of the window. Where the lines never settle, or are too few to test,
the record says so: the count's window is kept, never silently taken for steady."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlperf.metrics.steady import DEFAULT_TOLERANCE, DEFAULT_WINDOWS, windows_stable

SETTLE_WINDOWS = 8  # windows looked at per size: a warm-up past 5 of them is not the count's slip but a slow run
LONGEST = 8  # lines per window tried at most (an accumulation of 8 micro-batches a line each)
SETTLE_LINES = SETTLE_WINDOWS * LONGEST  # the first kept lines held back until the test places the window


@dataclass(frozen=True)
class Line:
    """A kept line as the test sees it: the iteration it ends, the iterations it covers, its rate (None: none)."""

    step: int | None
    iterations: float
    rate: float | None


@dataclass(frozen=True)
class Settled:
    """The first kept lines that are warm-up by measurement (`drop`), and what the record says (None: nothing)."""

    drop: int
    note: str | None


def settle(lines: Sequence[Line], warmup: int) -> Settled:
    """Where `lines` (the run's first kept lines, past the `warmup`-iteration count) settle. Lines before the first
    with a rate (the first stamp, with none before it) are kept where the test settles at once."""
    lead = next((i for i, line in enumerate(lines) if line.rate is not None), len(lines))
    rated = list(lines[lead:])
    if len(rated) < DEFAULT_WINDOWS:
        return Settled(0, _too_few(len(rated), warmup))
    for size in range(1, LONGEST + 1):
        rates = _window_rates(rated, size)
        if len(rates) < DEFAULT_WINDOWS:
            break
        at = next((i for i in range(len(rates) - DEFAULT_WINDOWS + 1) if _stable(rates[i : i + DEFAULT_WINDOWS])), None)
        if at == 0:
            return Settled(0, None)
        if at is not None:
            return _settled_after(rated, rates, at, size, lead, warmup)
    return Settled(0, _never(len(rated), warmup))


def _window_rates(lines: list[Line], size: int) -> list[float | None]:
    """The rates of consecutive windows of `size` lines (whole windows only, SETTLE_WINDOWS at most): each window's
    iterations over their time, a window holding a line without a rate has none."""
    rates: list[float | None] = []
    for i in range(0, min(len(lines), size * SETTLE_WINDOWS) - size + 1, size):
        window = lines[i : i + size]
        if any(line.rate is None for line in window):
            rates.append(None)
            continue
        time = sum(line.iterations / line.rate for line in window if line.rate)
        rates.append(sum(line.iterations for line in window) / time)
    return rates


def _stable(rates: list[float | None]) -> bool:
    return None not in rates and windows_stable([r for r in rates if r is not None], DEFAULT_TOLERANCE)


def _band(size: int) -> str:
    windows = "lines" if size == 1 else f"windows of {size} lines"
    return f"the steady-state test: {DEFAULT_WINDOWS} {windows} within +-{DEFAULT_TOLERANCE:.0%} of their median"


def _settled_after(rated: list[Line], rates: list[float | None], at: int, size: int, lead: int, warmup: int) -> Settled:
    """The first `at` windows are warm-up: the note says how far off they ran and where the window now starts."""
    drop = lead + at * size
    step = rated[at * size - 1].step
    steady = statistics.median(r for r in rates[at : at + DEFAULT_WINDOWS] if r is not None)
    off = max((r for r in rates[:at] if r is not None), key=lambda r: abs(r / steady - 1), default=steady) / steady - 1
    return Settled(
        drop,
        f"the step times settle only after the first {drop} kept line(s) ({_band(size)}): those, to iteration "
        f"{step}, ran up to {off:+.0%} against the steady ones and are warm-up by measurement: the window starts "
        f"after iteration {step} (the format's count: {warmup} iterations; --warmup {step} gives the same window)",
    )


def _too_few(lines: int, warmup: int) -> str:
    return (
        f"only {lines} kept line(s) with a rate: too few for {_band(1)}, so the window past the {warmup}-iteration "
        "warm-up count is not shown to be steady"
    )


def _never(lines: int, warmup: int) -> str:
    return (
        f"the first {min(lines, SETTLE_LINES)} kept lines' step times do not settle (the steady-state test: "
        f"{DEFAULT_WINDOWS} windows of 1 to {LONGEST} lines within +-{DEFAULT_TOLERANCE:.0%} of their median): the "
        f"window, past the {warmup}-iteration count, may hold warm-up"
    )
