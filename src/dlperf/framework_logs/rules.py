"""The two published rules over a run's window: `printed` (the mean printed figure, or the kept iterations' samples
over their summed time) and `timestamp` (samples over the time stamps of the window's ends), and the window's
figure by the other reading, the cross-check beside it."""

from __future__ import annotations

import math
from collections.abc import Callable

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, Point, RunShape
from dlperf.framework_logs.window import Window, samples_between

PRECISION = 0.02  # a figure whose printed times' rounding leaves it unknown to more than 2 % is refused
PAUSED_READING = "time stamps x sample counts of the intervals without evaluation or checkpoint saving"


class CoarseLines(DataError):
    """A figure the printed times' rounding leaves unknown beyond PRECISION: the caller adds what else the user can
    do (`dlperf extract`: run the script under `dlperf run --command`; a run with the hook off: turn it on)."""


def applied(w: Window, fmt: LogFormat, rule: str) -> str:
    """The rule the window is read by: `timestamp` where `printed` was asked but no kept line prints a figure and
    the format's time stamps stand in (DeepSpeed's `step=` lines alone)."""
    if rule == "printed" and fmt.stamps_when_unprinted and not w.timed.seconds and not w.speed_n:
        return "timestamp"
    return rule


def figure(w: Window, fmt: LogFormat, rule: str, shape: RunShape) -> float:
    """The window's figure by `rule`."""
    return printed(w, fmt) if rule == "printed" else timestamped(w, fmt, shape)


def batch_free(w: Window, fmt: LogFormat, rule: str) -> bool:
    """The figure is the printed speed of every kept line, which needs no batch from the file's path."""
    return rule == "printed" and (fmt.batch_free or fmt.printed_from == "speed" and w.speed_n == w.kept)


def second(w: Window, fmt: LogFormat, rule: str, shape: RunShape) -> tuple[float | None, str | None]:
    """The window's figure by a reading other than `rule`: the reader's own second reading of every kept interval
    (an epoch's time stamps x the data set), else the other rule where the lines carry what it needs and cover the
    same iterations."""
    if w.check_n and w.check_n * 2 >= w.kept:  # intervals with evaluation inside have no check of their own
        return w.check_sum / w.check_n, fmt.check_reading
    if rule == "printed":
        return _second_by_stamps(w, fmt, shape)
    return _usable(lambda: printed(w, fmt), "printed", w)


def _second_by_stamps(w: Window, fmt: LogFormat, shape: RunShape) -> tuple[float | None, str | None]:
    if _stamps_miss_iterations(w):
        return None, None
    if w.stamps.paused:
        rate = w.stamps.rate()
        return (rate, PAUSED_READING) if rate is not None else (None, None)
    return _usable(lambda: timestamped(w, fmt, shape), "timestamp", w)


def _usable(reading: Callable[[], float], rule: str, w: Window) -> tuple[float | None, str | None]:
    """The figure `reading` gives and what it read, where it gives a usable one."""
    try:
        value = reading()
    except DataError:
        return None, None
    if not (math.isfinite(value) and value > 0):
        return None, None
    return value, _reading_of(rule, w)


def _stamps_miss_iterations(w: Window) -> bool:
    """The printed figures time iterations before the first stamp the timestamp rule has (Megatron's line after
    its first iteration averages from the run's start): the two readings do not cover the same iterations."""
    anchor = w.anchor
    return anchor is not None and anchor.step is not None and w.first_start is not None and w.first_start < anchor.step


def _reading_of(rule: str, w: Window) -> str:
    """What the `rule` read in this window, said for the record."""
    if rule != "timestamp":
        return "the printed figures"
    if w.last is not None and w.last.samples is not None:
        return "time stamps x sample counts"
    return "time stamps x iterations x the given global batch"


def printed(w: Window, fmt: LogFormat) -> float:
    """The mean printed throughput (the DLPerf reports' rule for their formats); for formats that print a time per
    iteration, the kept iterations' samples over their summed time (`TimedSteps`); for formats whose rates combine
    over time (`rates_over_time`: torchtitan, MaxText, torchtune), each line's iterations at its rate."""
    if fmt.printed_from == "seconds" or not w.speed_n:
        if not w.timed.seconds > 0:
            raise DataError(
                f"the kept {fmt.name} lines print no usable throughput or time per iteration{fmt.instead_of('printed')}"
            )
        _precise(
            w.timed.resolution / w.timed.seconds,
            f"their times per iteration (mean {w.timed.mean_seconds():.4g} s)",
            fmt,
        )
        return w.timed.rate()
    if fmt.rates_over_time:
        return w.rate_iterations / w.rate_seconds
    return w.speed_sum / w.speed_n


def timestamped(w: Window, fmt: LogFormat, shape: RunShape) -> float:
    """Samples between the window's ends over the time between their stamps (the anchor before the window, else
    its first kept line, to its last)."""
    first, last, elapsed = _stamped_ends(w, fmt)
    if elapsed > 0 and (first.resolution or last.resolution):
        _precise(((first.resolution or 0.0) + (last.resolution or 0.0)) / elapsed, f"{elapsed:.4g} s between them", fmt)
    samples = samples_between(first, last, fmt, shape.global_batch)
    if elapsed <= 0 or samples <= 0:
        raise DataError(
            f"time stamps or iterations do not advance between the first and last kept line "
            f"({elapsed:g} s, {samples:g} samples)"
        )
    return samples / elapsed


def _stamped_ends(w: Window, fmt: LogFormat) -> tuple[Point, Point, float]:
    """The two points the timestamp rule reads and the seconds between their stamps, refused where they are one
    line or carry no time stamps."""
    first, last = w.anchor or w.first, w.last
    assert first is not None and last is not None  # at least one point was kept
    if first is last:
        raise DataError(
            f"the timestamp rule needs two lines but only one {fmt.name} line is there{fmt.instead_of('timestamp')}"
        )
    if first.timestamp is None or last.timestamp is None:
        raise DataError(f"these {fmt.name} lines carry no time stamps{fmt.instead_of('timestamp')}")
    return first, last, last.timestamp - first.timestamp


def _precise(bound: float, what: str, fmt: LogFormat) -> None:
    """Refuse a figure the printed times' rounding leaves unknown to more than PRECISION."""
    if bound > PRECISION:
        raise CoarseLines(
            f"the kept {fmt.name} lines are printed too coarsely for a figure: rounded as printed, {what} are known to "
            f"+-{bound:.1%}, over dlperf's {PRECISION:.0%}; run it longer or with slower steps"
        )
