"""One MLPerf log's figures as its events stream past, in the order of the format's rules (the package's docstring):
its progress events where it prints them, else its timed blocks, else one whole-run figure, else its epochs. The
first figure is held back, so that a log with one gives it as the whole run's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from dlperf.framework_logs.base import Point, RunShape
from dlperf.framework_logs.formats.mlperf.blocks import Blocks
from dlperf.framework_logs.formats.mlperf.counting import EVALUATED, FRACTION_EPOCHS, TOKEN_COUNTED, Counts
from dlperf.framework_logs.formats.mlperf.events import Event, number
from dlperf.framework_logs.formats.mlperf.evidence import Evidence

MAX_HELD = 100_000  # step-time events held back while a throughput figure may still come
STEP_TIME_KEYS = ("train_step_timing", "train_step_timing in s", "train_step_time", "time")


def _step_key(value: dict[str, Any]) -> str | None:
    """The tracked step-time key: `train_step_timing` (v3.x), `train_step_timing in s` (v4.1+), `train_step_time`
    (mlperf_common's callbacks, v5.0), maskrcnn's `time`. Only keys in seconds: a key naming another unit is not a
    step time in seconds."""
    return next((key for key in value if key in STEP_TIME_KEYS), None)


class MlperfLog:
    """One MLPerf log's state while its events stream past."""

    def __init__(self, shape: RunShape) -> None:
        self.counts = Counts(float(shape.global_batch))
        self.evidence = Evidence(shape.world_size, self.counts)
        self.blocks = Blocks(self.counts)
        self.tracked = False
        self.previous: tuple[float, float] | None = None  # (time, samples) at the last progress event
        self.eval_since = False  # an evaluation since the last progress event
        self.index = 0
        self.held: Point | None = None
        self.timed: list[Point] = []  # step-time-only progress, held until the log shows it prints no throughput
        self.throughputs = False  # the log prints throughput figures: they are its progress, not the step times
        self.own_throughputs = False  # throughput events of their own are the progress (no tracked steps)
        self.summary: Point | None = None

    def feed(self, event: Event) -> Iterator[Point]:
        self.counts.declare(event)
        self.eval_since = self.eval_since or event.key in EVALUATED
        if (stamp := event.stamp) is None:
            return
        if (advance := self.counts.advance(event.metadata)) is not None:
            self.blocks.counted(event.key, *advance, stamp)
        if (on := _ON_EVENT.get(event.key)) is not None:
            yield from on(self, event, stamp) or ()

    # --- what each event does beyond the counts and declarations every event is read for --------------------------
    def _epoch_start(self, event: Event, stamp: float) -> None:
        self.evidence.epoch_start(event.metadata, stamp)
        if not self.blocks.seen and not self.tracked:  # epochs are the log's only intervals (tinygrad's logs)
            self.blocks.epoch_start(event.metadata, stamp)

    def _block_start(self, event: Event, stamp: float) -> None:
        self.blocks.seen = True
        self.blocks.start(event.metadata, stamp)

    def _block_stop(self, event: Event, stamp: float) -> Iterator[Point]:
        if (point := self._interval(event, stamp)) is not None:
            yield from self._emit(point)

    def _epoch_stop(self, event: Event, stamp: float) -> None:
        if self.blocks.epoch_open() and (epoch := self._interval(event, stamp)) is not None:
            self.blocks.epochs.append(epoch)  # the log's figure only where it has no other (finish)
        self.evidence.epoch_stop(event.metadata, stamp, self.counts.epoch_size())

    def _interval(self, event: Event, stamp: float) -> Point | None:
        """The interval ending here; none once progress events are the log's figures."""
        if self.tracked:
            self.blocks.open = None
            return None
        return self.blocks.interval(event.metadata, stamp, self.index + 1)

    def _throughput(self, event: Event, stamp: float) -> Iterator[Point]:
        """A throughput event of its own joins the tracked step before it (maskrcnn's); in a log with no tracked
        steps it is the progress (Intel's ResNet: one per epoch)."""
        yield from self._release()
        if (speed := number(event.value)) is None or self.counts.stopped:
            return
        if self.tracked and not self.own_throughputs:
            if self.index:
                yield Point(step=self.index, speed=speed * self.evidence.factor(), timestamp=stamp)
        else:
            self.own_throughputs = True
            check = self.evidence.check(speed)
            point = Point(step=self.index + 1, speed=speed * self.evidence.factor(), timestamp=stamp, check=check)
            yield from self._emit(self._progress(replace(point, note=self.evidence.note)))

    def _tracked_stats(self, event: Event, stamp: float) -> Iterator[Point]:
        value, metadata = event.value, event.metadata
        if not isinstance(value, dict) or (point := self._tracked_point(value, metadata, stamp)) is None:
            return
        if self.counts.stopped or isinstance(metadata.get("step"), list):  # a whole-run summary after the run
            if self.summary is None:
                self.summary = self._whole_run(point, value)
            return
        printed = point.speed is not None
        point = self._progress(point)
        if printed:
            self.throughputs, self.timed = True, []
            yield from self._emit(point)
        elif not self.throughputs:
            self.timed.append(point)
            if len(self.timed) >= MAX_HELD:  # a log this long that printed no throughput yet: its step times
                yield from self._release()

    # --- progress events ------------------------------------------------------------------------------------------
    def _tracked_point(self, value: dict[str, Any], metadata: dict[str, Any], stamp: float) -> Point | None:
        """A `tracked_stats` event's point: its throughput (scaled to global) or step time (None: neither)."""
        speed = number(value.get("throughput"))
        step_key = _step_key(value)
        seconds = number(value.get(step_key)) if step_key else None
        if speed is None and seconds is None:
            return None
        check = self.evidence.check(speed)
        done, count_note = self.counts.progress(metadata) or (None, None)
        speed, note = (speed * self.evidence.factor(), self.evidence.note) if speed is not None else (None, None)
        return Point(
            step=self.index + 1,
            speed=speed,
            seconds=seconds,
            batch=self.counts.batch,  # a step time alone is timed as every format's: samples over the summed time
            timestamp=stamp,
            samples=done,
            check=self._checked(check, done, stamp),
            note=count_note or note,
            tokens=self.counts.tokens_per_sample(),
        )

    def _checked(self, check: float | None, done: float | None, stamp: float) -> float | None:
        """The epoch's check, else the count's; the count is kept for the next event's second reading."""
        if check is None:
            check = self._second_reading(done, stamp)
        if done is not None:
            self.previous, self.eval_since = (stamp, done), False
        return check

    def _progress(self, point: Point) -> Point:
        """A progress event; the first supersedes the timed blocks read before it."""
        if not self.tracked and self.held is not None:
            self.held, self.index = None, 0
            point = replace(point, step=1)
        self.tracked = True
        return point

    def _second_reading(self, done: float | None, stamp: float) -> float | None:
        """Samples over time from the count and the time stamps: since the start for a benchmark counting
        fractions of an epoch, else this step's samples over the time since the last (no evaluation between)."""
        if self.counts.benchmark in FRACTION_EPOCHS and done:
            return self._since_start(done, stamp)
        if done is None or self.previous is None or self.eval_since:
            return None
        then, before = self.previous
        return (done - before) / (stamp - then) if stamp > then and done > before else None

    def _since_start(self, done: float, stamp: float) -> float | None:
        start = self.evidence.first_start or self.counts.run_start
        return done / (stamp - start) if start is not None and stamp > start else None

    def _whole_run(self, point: Point, value: dict[str, Any]) -> Point:
        """A figure for the whole run after run_stop: a token rate (gpt3's) is converted to sequences."""
        seq_len = self.counts.seq_len
        if point.speed is not None and seq_len and self.counts.benchmark in TOKEN_COUNTED and "throughput" in value:
            note = f"whole-run figure in tokens/s including evaluation, / {seq_len:g} tokens per sequence"
            return replace(point, speed=point.speed / seq_len, note=note)
        return point

    # --- emitting -------------------------------------------------------------------------------------------------
    def _emit(self, point: Point) -> Iterator[Point]:
        """Points one by one; the first is held, so that a log with one figure gives it as the whole run's."""
        self.index += 1
        point = replace(point, step=self.index, unit=self.counts.unit)
        if self.held is not None:
            yield self.held
            self.held = None
        if self.index == 1:
            self.held = point
            return
        yield point

    def _release(self) -> Iterator[Point]:
        for point in self.timed:
            yield from self._emit(point)
        self.timed = []

    def finish(self) -> Iterator[Point]:
        yield from self._release()
        if self.index == 0 and self.summary is None:
            for epoch in self.blocks.epochs:
                yield from self._emit(epoch)
        if self.held is not None and self.index == 1:
            yield self._alone(self.held)
        elif self.held is not None:
            yield self.held
        elif self.index == 0 and self.summary is not None:
            yield replace(self._alone(self.summary), unit=self.counts.unit)

    def _alone(self, point: Point) -> Point:
        """The only figure of the log stands for the whole run: no warm-up can be left out of it."""
        parts = ["one figure for the whole run, taken as it is (no warm-up can be left out)"]
        if self.counts.evaluated:
            parts.append("it includes evaluation")
        if point.note:
            parts.append(point.note)
        return replace(point, step=1, start=1, note="; ".join(parts))


_ON_EVENT: dict[str, Callable[[MlperfLog, Event, float], Iterator[Point] | None]] = {
    "epoch_start": MlperfLog._epoch_start,
    "block_start": MlperfLog._block_start,
    "block_stop": MlperfLog._block_stop,
    "epoch_stop": MlperfLog._epoch_stop,
    "throughput": MlperfLog._throughput,
    "tracked_stats": MlperfLog._tracked_stats,
}
