"""The two published rules, computed while the points stream past (constant memory)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from dlperf.errors import DataError
from dlperf.peers.base import PeerFormat, Point, RunShape


@dataclass(frozen=True)
class Measured:
    """One log's throughput (global samples/s) and what it was computed from."""

    throughput: float
    kept: int
    latency_ms: float | None
    metrics: dict[str, float]


class _Window:
    """Skips `warmup` points, keeps the next `window` (or all); remembers only sums and two points."""

    def __init__(self, warmup: int, window: int | None) -> None:
        self.warmup, self.window = warmup, window
        self.seen = 0
        self.kept = 0
        self.anchor: Point | None = None  # the last warm-up point: where the timestamp rule starts
        self.last: Point | None = None
        self.speed_sum = self.seconds_sum = 0.0
        self.speed_n = self.seconds_n = 0
        self.metric_sums: dict[str, float] = {}

    def full(self) -> bool:
        return self.window is not None and self.kept >= self.window

    def add(self, point: Point) -> None:
        self.seen += 1
        if self.seen <= self.warmup:
            self.anchor = point
            return
        if self.anchor is None:  # no warm-up skipped: the first line still only marks the start
            self.anchor = point
        self.kept += 1
        self.last = point
        if point.speed is not None:
            self.speed_sum += point.speed
            self.speed_n += 1
        if point.seconds is not None:
            self.seconds_sum += point.seconds
            self.seconds_n += 1
        for name, value in point.metrics:
            self.metric_sums[name] = self.metric_sums.get(name, 0.0) + value


def measure(
    points: Iterable[Point], fmt: PeerFormat, rule: str, warmup: int, window: int | None, shape: RunShape
) -> Measured:
    """Apply `rule` to the points after `warmup` lines, over `window` lines (None: to the end)."""
    w = _Window(warmup, window)
    for point in points:
        w.add(point)
        if w.full():
            break
    if w.seen == 0:
        raise DataError(f"no {fmt.name} throughput lines in it")
    if w.kept == 0:
        raise DataError(
            f"only {w.seen} {fmt.name} throughput lines, not more than the warm-up skip of {warmup}: "
            f"the run is too short, or pass a smaller --warmup"
        )
    throughput = _printed(w, fmt, shape) if rule == "printed" else _timestamped(w, fmt, shape)
    if not (math.isfinite(throughput) and throughput > 0):
        raise DataError(f"the {rule} rule gives a throughput of {throughput!r}: the kept lines hold no usable figures")
    latency = w.seconds_sum / w.seconds_n * 1000 if w.seconds_n else None
    metrics = {name: total / w.kept for name, total in w.metric_sums.items()}
    return Measured(throughput=throughput, kept=w.kept, latency_ms=latency, metrics=metrics)


def _printed(w: _Window, fmt: PeerFormat, shape: RunShape) -> float:
    if fmt.printed_from == "seconds":
        mean_seconds = w.seconds_sum / w.seconds_n if w.seconds_n else 0.0
        if not mean_seconds > 0:
            raise DataError(f"the kept {fmt.name} lines print no positive time per iteration")
        return shape.global_batch / mean_seconds
    if not w.speed_n:
        hint = ": use --rule timestamp" if "timestamp" in fmt.rules else ""
        raise DataError(f"the kept {fmt.name} lines print no usable throughput{hint}")
    return w.speed_sum / w.speed_n


def _timestamped(w: _Window, fmt: PeerFormat, shape: RunShape) -> float:
    first, last = w.anchor, w.last
    assert first is not None and last is not None  # at least one point was kept
    if first is last:
        raise DataError(
            f"the timestamp rule needs two lines but only one {fmt.name} line is there: lower --warmup "
            f"or use --rule printed"
        )
    if first.timestamp is None or last.timestamp is None:
        raise DataError(f"these {fmt.name} lines carry no time stamps: use --rule printed")
    elapsed = last.timestamp - first.timestamp
    if first.samples is not None and last.samples is not None:
        samples = last.samples - first.samples
    elif first.step is not None and last.step is not None:
        samples = (last.step - first.step) * shape.global_batch
    else:
        raise DataError(f"these {fmt.name} lines carry no iteration numbers: use --rule printed")
    if elapsed <= 0 or samples <= 0:
        raise DataError(
            f"time stamps or iterations do not advance between the first and last kept line "
            f"({elapsed:g} s, {samples:g} samples)"
        )
    return samples / elapsed
