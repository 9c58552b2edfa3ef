"""Screening: points whose figures cannot be a speed (a counter beyond any run, no finite number, above the
plausible bound) are left out and counted, and the first one's reason is kept for the record."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, Point, RunShape
from dlperf.framework_logs.plausibility import (
    MAX_FLOPS_PER_DEVICE,
    MAX_SAMPLES_PER_S_PER_DEVICE,
    above_bound,
    speed_bound,
)

MAX_COUNT = 10**15  # iterations a run can count: far beyond any (and exact in a float, unlike a 400-digit counter)


def count_text(value: int) -> str:
    """A counter for a message: a huge one by its digits, never printed whole."""
    return f"{value}" if abs(value) < 10**20 else f"a {len(str(abs(value)))}-digit number"


def _counter_beyond(point: Point) -> str | None:
    for name, count in (("iteration counter", point.step), ("interval start", point.start)):
        if count is not None and not -MAX_COUNT <= count <= MAX_COUNT:
            return f"{name} {count_text(count)} is beyond any run"
    return None


def _not_finite(point: Point) -> str | None:
    figures = {
        "time stamp": point.timestamp,
        "sample count": point.samples,
        "batch": point.batch,
        "memory": point.memory_mib,
        "second reading": point.check,
        **dict(point.metrics),
    }
    return next(
        (f"{name} {value!r} is not a finite number" for name, value in figures.items() if not _finite_or_none(value)),
        None,
    )


def _finite_or_none(value: float | None) -> bool:
    return value is None or math.isfinite(value)


def _counts_impossible(point: Point) -> str | None:
    if point.samples is not None and point.samples < 0:
        return f"sample count {point.samples!r} is negative"
    if point.batch is not None and point.batch <= 0:
        return f"batch {point.batch!r} is not positive"
    return None


def _first_reason(point: Point, checks: Iterable[Callable[[Point], str | None]]) -> str | None:
    """The first check's reason to refuse the point (None: none refuses it)."""
    return next((reason for check in checks if (reason := check(point)) is not None), None)


def absurd(point: Point) -> str | None:
    """Why a point's numbers cannot be a run's (a counter beyond any run, a figure that is no finite number)."""
    return _first_reason(point, (_counter_beyond, _not_finite, _counts_impossible))


def _positive_finite(value: float) -> bool:
    return math.isfinite(value) and value > 0


class Screen:
    """Passes the points whose figures can be a speed; counts and remembers why the others were refused."""

    def __init__(self, fmt: LogFormat, shape: RunShape) -> None:
        self.fmt, self.shape = fmt, shape
        self.bound = speed_bound(fmt, shape)
        self.samples_bound = MAX_SAMPLES_PER_S_PER_DEVICE * shape.world_size
        self.accepted = self.rejected = 0
        self.first_reason: str | None = None
        self.zero_time_steps: list[int] = []  # lines printing a time of 0: steps faster than the print can time

    def __call__(self, points: Iterable[Point]) -> Iterator[Point]:
        for point in points:
            reason = self._reason(point)
            if reason is None:
                self.accepted += 1
                yield point
                continue
            self.rejected += 1
            if point.seconds == 0 and point.step is not None:
                self.zero_time_steps.append(point.step)
            if self.first_reason is None:
                at = f"iteration {count_text(point.step)}" if point.step is not None else "a line"
                self.first_reason = f"{at}: {reason}"

    def _reason(self, point: Point) -> str | None:
        return _first_reason(point, (absurd, _tflops_beyond, self._speed_reason, self._seconds_reason))

    def _speed_reason(self, point: Point) -> str | None:
        if point.speed is None:
            return None
        if not _positive_finite(point.speed):
            return f"throughput {point.speed!r} is not a positive finite number"
        if point.speed > self.bound:
            return f"throughput {point.speed:.6g} is {above_bound(self.fmt, self.shape)}"
        return None

    def _seconds_reason(self, point: Point) -> str | None:
        if point.seconds is None:
            return None
        if not _positive_finite(point.seconds):
            return f"time per iteration {point.seconds!r} s is not a positive finite number"
        batch = point.batch or self.shape.global_batch
        if point.speed is None and batch / point.seconds > self.samples_bound:
            return (
                f"time per iteration {point.seconds:.6g} s means {batch / point.seconds:.6g} "
                f"samples/s, above the plausible {MAX_SAMPLES_PER_S_PER_DEVICE:g} per device"
            )
        return None


def _tflops_beyond(point: Point) -> str | None:
    """A printed TFLOP/s above any device's peak: a step timed while only dispatched."""
    tflops = dict(point.metrics).get("tflops_per_device")
    if tflops is not None and tflops * 1e12 > MAX_FLOPS_PER_DEVICE:
        return f"{tflops:.6g} TFLOP/s per device printed: above the physical {MAX_FLOPS_PER_DEVICE / 1e12:g}"
    return None


def plausible(throughput: float, rule: str, fmt: LogFormat, shape: RunShape) -> float:
    """The rule's figure, refused where it cannot be a speed."""
    if not _positive_finite(throughput):
        raise DataError(f"the {rule} rule gives a throughput of {throughput!r}: the kept lines hold no usable figures")
    if throughput > speed_bound(fmt, shape):
        raise DataError(
            f"the {rule} rule gives {throughput:.6g}, {above_bound(fmt, shape)}: the kept lines' figures are wrong"
        )
    return throughput
