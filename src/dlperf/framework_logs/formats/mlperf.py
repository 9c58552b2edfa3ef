"""MLPerf training logs (mlperf-logging): `:::MLLOG {json}` lines, every round v1.0-v5.x. A file holding them is
MLPerf, whatever else it prints (DLRM's HugeCTR lines, launcher noise, exit tracebacks after `run_stop`).

MLPerf publishes time to train, not throughput. The figure is read from the progress the log has, in this order:
1. `tracked_stats` progress events (the first one, start-up and compiling, skipped; the rest averaged): a
   `throughput`, or where the log prints none a step time (`train_step_timing`, `train_step_timing in s`,
   `train_step_time`, maskrcnn's `time`): the global batch over the summed step time. A `throughput` event of its
   own joins the tracked step before it (maskrcnn), and is the progress itself where the log has no tracked steps
   (Intel's, CTuning's, Krai's ResNet).
2. Timed blocks (`block_start`/`block_stop`) where there are no progress events: samples in the block / its time.
   A block's samples come from the counts the benchmark keeps (mlperf_logging's `samples_count`, `epoch_num`,
   `first_epoch_num` + `epoch_count`), converted by what the benchmark counts: epochs (x the data set's size),
   tokens (/ `max_sequence_length`), iterations (Habana's block counters, x the global batch) or samples.
3. One whole-run figure (gnn's and DLRM's `tracked_stats`, before or after `run_stop`), taken as it is.
4. Epochs (`epoch_start`/`epoch_stop`) where the log times nothing else (tinygrad's logs): timed like blocks, an
   epoch benchmark's epoch being its data set, a sample-counted one's the count its evaluations reached.

Units are the benchmark's own: sequences for language models (a token count is divided by the sequence length),
images, samples. Per device or global is decided by evidence: where an epoch's time stamps and the data set's size
give a second figure, the printed throughput is global if it agrees, per device if x the world size agrees
(retinanet v5.0 declares `local_batch_size` but prints global figures); without evidence, a declared
`local_batch_size` means per device (NVIDIA's SSD). A `run_stop` with status success ends the run well: Python's
exit noise after it is not a failure.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from dlperf.framework_logs.base import LogFormat, Point, RunShape

PREFIX = ":::MLLOG "
AGREE = 0.10  # two readings of one interval agree within 10 % (an epoch's time includes its data loading)

# What each benchmark's progress counts, per the MLPerf training rules and mlperf_logging's benchmark keys.
# Epoch-counted benchmarks: training samples in one epoch (the data sets' published sizes: ImageNet-1k, the
# MLPerf OpenImages subset, COCO-2017 train, KiTS19's training cases).
EPOCH_SIZE = {"resnet": 1281167, "ssd": 1170301, "retinanet": 1170301, "maskrcnn": 117266, "unet3d": 168}
EPOCH_OF_TRAIN_SAMPLES = {"rnnt"}  # epoch-counted; `train_samples` is the epoch's size (utterances kept)
FRACTION_EPOCHS = {"dlrm", "dlrm_dcnv2", "gnn", "rgat"}  # epoch_num is a fraction of `train_samples`
TOKEN_COUNTED = {"gpt3"}  # sample counts are tokens; a sequence is `max_sequence_length` tokens
EVALUATIONS = {"eval_start", "eval_accuracy", "eval_stop"}  # their count is what the run trained by then
MAX_HELD = 100_000  # step-time events held back while a throughput figure may still come
STEP_TIME_KEYS = ("train_step_timing", "train_step_timing in s", "train_step_time", "time")
# A progress event's `step` counts samples (`samples_count` in their blocks), unless it is token-sized
# the events that declare a size, and the reader's attribute each one sets
_SIZES = {"global_batch_size": "batch", "max_sequence_length": "seq_len", "train_samples": "train_samples"}
SAMPLE_COUNTED = {"bert", "stable_diffusion", "llama2_70b_lora", "llama31_8b", "llama31_405b", "flux1"}
# What one sample is, per benchmark (MLPerf training rules: the data each benchmark trains on).
UNITS = {
    **dict.fromkeys(("resnet", "ssd", "retinanet", "maskrcnn", "stable_diffusion", "flux1"), "images/s"),
    **dict.fromkeys(("bert", "gpt3", "llama2_70b_lora", "llama31_8b", "llama31_405b"), "sequences/s"),
    **dict.fromkeys(("dlrm", "dlrm_dcnv2"), "records/s"),
}


def _first_known(*values: float | None) -> float:
    """The first count that is known, else 0 (the run's start)."""
    return next((v for v in values if v is not None), 0.0)


def _number(value: Any) -> float | None:
    """A finite JSON number (bools and huge integers are not figures)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _event(line: str) -> dict[str, Any] | None:
    start = line.find(PREFIX)
    if start < 0:
        return None
    try:
        event = json.loads(line[start + len(PREFIX) :])
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def _close(a: float, b: float) -> bool:
    return b > 0 and abs(a / b - 1) <= AGREE


def _step_key(value: dict[str, Any]) -> str | None:
    """The tracked step-time key: `train_step_timing` (v3.x), `train_step_timing in s` (v4.1+), `train_step_time`
    (mlperf_common's callbacks, v5.0), maskrcnn's `time`. Only keys in seconds: a key naming another unit is not a
    step time in seconds."""
    return next((key for key in value if key in STEP_TIME_KEYS), None)


@dataclass(frozen=True)
class _Block:
    """An open timed block: when it started, the samples done then by its own count (`first_epoch_num`), its
    length where it states one, and the other counts it started at."""

    stamp: float
    begin: float | None
    size: float | None
    first: float | None  # first_epoch_num where the block also states epoch_count (Habana counts iterations)
    count: float | None  # samples_count at the start
    before: float | None  # samples done at the start by other events' counts

    def stated_span(self) -> tuple[float, float] | None:
        """The samples its own first_epoch_num + epoch_count state, where it states them."""
        if self.begin is None or self.size is None:
            return None
        return self.begin, self.begin + self.size

    def iterations_span(self, done: float | None, batch: float) -> tuple[float, float] | None:
        """Habana's count: first_epoch_num at a block's end is the iteration count done."""
        if self.first is None or done is None or done <= self.first:
            return None
        return self.first * batch, done * batch


class _Log:
    """One MLPerf log's state while its events stream past."""

    def __init__(self, shape: RunShape) -> None:
        self.shape = shape
        self.batch = float(shape.global_batch)
        self.seq_len: float | None = None
        self.benchmark = ""
        self.train_samples: float | None = None
        self.local_declared = False
        self.scale: float | None = None  # per device (world size) or global (1), once the evidence decides
        self.scale_note: str | None = None
        self.stopped = self.evaluated = self.timed_eval = self.tracked = False
        self.run_start: float | None = None
        self.epoch_starts: dict[float, float] = {}
        self.first_epoch_start: float | None = None
        self.epoch_figure: float | None = None  # the last finished epoch's figure, for the next throughput event
        self.epoch_seconds: float | None = None  # the last finished epoch's time
        self.last_count: float | None = None  # the last tracked step count (for its unit)
        self.cumulative: float | None = None  # samples trained so far, from any event's count
        self.block: _Block | None = None
        self.blocks = False  # the log times blocks; without them (and tracked progress) its epochs are its intervals
        self.epochs_timed = 0
        self.epochs: list[Point] = []  # each epoch's figure, where epochs are the log's only intervals
        self.counted_in_block = False  # the log's counts rose inside the open block
        self.marks: list[tuple[float, float]] = []  # (time, samples) of the evaluations inside the open block
        self.last_stop: tuple[float, float] | None = None  # (time, samples) at the last block's end
        self.previous: tuple[float, float] | None = None  # (time, samples) at the last progress event
        self.eval_since = False  # an evaluation since the last progress event
        self.index = 0
        self.held: Point | None = None
        self.timed: list[Point] = []  # step-time-only progress, held until the log shows it prints no throughput
        self.throughputs = False  # the log prints throughput figures: they are its progress, not the step times
        self.own_throughputs = False  # throughput events of their own are the progress (no tracked steps)
        self.summary: Point | None = None

    # --- units --------------------------------------------------------------------------------------------------
    def samples(self, count: float, delta: float | None = None) -> tuple[float | None, str | None]:
        """A count in the benchmark's unit -> samples, and a note when it was not samples."""
        if (size := self.epoch_size()) is not None:
            return count * size, None
        if self.benchmark in FRACTION_EPOCHS:
            return (count * self.train_samples, None) if self.train_samples else (None, None)
        if self.seq_len and (self.benchmark in TOKEN_COUNTED or self._token_sized(delta)):
            return count / self.seq_len, f"counts are tokens: / {self.seq_len:g} tokens per sequence"
        return count, None

    def epoch_size(self) -> float | None:
        """Samples in one epoch of an epoch-counted benchmark (None: the benchmark does not count epochs)."""
        if self.benchmark in EPOCH_SIZE:
            return float(EPOCH_SIZE[self.benchmark])
        if self.benchmark in EPOCH_OF_TRAIN_SAMPLES:
            return self.train_samples
        return None

    def counts_samples(self) -> bool:
        """Whether `epoch_num` counts samples, tokens or a fraction of the data (not whole epochs)."""
        return self.benchmark in SAMPLE_COUNTED | TOKEN_COUNTED | FRACTION_EPOCHS

    def _token_sized(self, delta: float | None) -> bool:
        """A count step of whole global batches of full sequences is a token count."""
        if not delta or not self.seq_len:
            return False
        steps = delta / (self.batch * self.seq_len)
        return steps >= 1 and abs(steps - round(steps)) < 1e-6

    def tokens_per_sample(self) -> int | None:
        return int(self.seq_len) if self.seq_len else None

    # --- events -------------------------------------------------------------------------------------------------
    def feed(self, event: dict[str, Any]) -> Iterator[Point]:
        key, value = event.get("key"), event.get("value")
        metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        time_ms = _number(event.get("time_ms"))
        stamp = None if time_ms is None else time_ms / 1000
        self._declare(key, value, stamp)
        if stamp is None:
            return
        self._count(key, metadata, stamp)
        if (on := _ON_EVENT.get(key)) is not None:  # type: ignore[arg-type]
            yield from on(self, value, metadata, stamp)

    def _on_epoch_start(self, value: Any, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        self._epoch_start(metadata, stamp)
        return iter(())

    def _on_block_start(self, value: Any, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        self.blocks = True
        self._block_start(metadata, stamp)
        return iter(())

    def _on_block_stop(self, value: Any, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        return self._block_stop(metadata, stamp)

    def _on_epoch_stop(self, value: Any, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        if self._epoch_timed() and (epoch := self._interval(metadata, stamp)) is not None:
            self.epochs.append(epoch)  # the log's figure only where it has no other (finish)
        self._epoch_stop(metadata, stamp)
        return iter(())

    def _on_throughput(self, value: Any, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        return self._throughput(value, stamp)

    def _on_tracked_stats(self, value: Any, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        return self._tracked(value, metadata, stamp) if isinstance(value, dict) else iter(())

    def _throughput(self, value: Any, stamp: float) -> Iterator[Point]:
        """A throughput event of its own joins the tracked step before it (maskrcnn's); in a log with no tracked
        steps it is the progress (Intel's ResNet: one per epoch)."""
        yield from self._release()
        if (number := _number(value)) is None or self.stopped:
            return
        if self.tracked and not self.own_throughputs:
            if self.index:
                yield Point(step=self.index, speed=number * self._scale(), timestamp=stamp)
        else:
            self.own_throughputs = True
            check = self._epoch_check(number)
            point = Point(step=self.index + 1, speed=number * self._scale(), timestamp=stamp, check=check)
            yield from self._emit(self._progress(replace(point, note=self.scale_note)))

    def _declare(self, key: Any, value: Any, stamp: float | None) -> None:
        """What the run declares or marks: its sizes, its benchmark, its start and stop, its evaluations."""
        if key in _SIZES and (number := _number(value)):
            setattr(self, _SIZES[key], number)
        elif key == "submission_benchmark" and isinstance(value, str):
            self.benchmark = value.lower()
        elif key == "local_batch_size":
            self.local_declared = True
        elif key == "run_start":
            self.run_start = stamp
        elif key == "run_stop":
            self.stopped = True
        elif key in ("eval_start", "eval_accuracy"):
            self.evaluated = self.eval_since = True
            self.timed_eval = self.timed_eval or key == "eval_start"

    def _count(self, key: Any, metadata: dict[str, Any], stamp: float) -> None:
        """Samples trained so far, where the event's count says (bert's epoch_num, samples_count, step_num); inside
        an open block, whether it rose and the evaluations' counts (MLPerf counts a run by its evaluations)."""
        count = self._event_count(metadata)
        if count is None:
            return
        rose = self.cumulative is None or count > self.cumulative
        self.cumulative = max(self.cumulative or 0.0, count)
        if self.block is None or key == "block_stop":
            return
        self.counted_in_block = self.counted_in_block or rose
        if key in EVALUATIONS and (not self.marks or count > self.marks[-1][1]):
            self.marks.append((stamp, count))

    def _event_count(self, metadata: dict[str, Any]) -> float | None:
        """The samples trained so far by the event's own count: samples, steps x the batch, or sample-counting
        epochs (None: it counts none)."""
        if (count := _number(metadata.get("samples_count"))) is not None:
            return count
        if (steps := _number(metadata.get("step_num"))) is not None:
            return steps * self.batch
        if (epochs := _number(metadata.get("epoch_num"))) is not None and self.counts_samples():
            return self.samples(epochs)[0]
        return None

    def _epoch_start(self, metadata: dict[str, Any], stamp: float) -> None:
        number = _number(metadata.get("epoch_num"))
        if number is not None:
            self.epoch_starts[number] = stamp
        if self.first_epoch_start is None:
            self.first_epoch_start = stamp
        self.epoch_figure = None
        if not self.blocks and not self.tracked:  # epochs are the log's only intervals (tinygrad's logs)
            self._block_start(metadata, stamp)
            size = self.epoch_size()
            if self.block is not None and size is not None:
                self.block = replace(self.block, begin=self.epochs_timed * size, size=size)
            self.epochs_timed += 1

    def _epoch_timed(self) -> bool:
        """Whether an epoch is open as the log's timed interval (no blocks, no tracked progress)."""
        return self.block is not None and not self.blocks

    def _epoch_stop(self, metadata: dict[str, Any], stamp: float) -> None:
        """An epoch's own figure: the data set over its time; not for an epoch far shorter than the one before,
        which did not train the data set (a run that stopped inside it)."""
        number = _number(metadata.get("epoch_num"))
        start = self.epoch_starts.pop(number, None) if number is not None else None
        size = self.epoch_size()
        if start is None or not size or stamp <= start:
            return
        seconds, last = stamp - start, self.epoch_seconds
        self.epoch_seconds = seconds
        if last is None or seconds >= last / 2:
            self.epoch_figure = size / seconds

    def _scale(self) -> float:
        if self.scale is not None:
            return self.scale
        return float(self.shape.world_size) if self.local_declared else 1.0

    def _decide_scale(self, raw: float, figure: float) -> None:
        """Per device or global, from an epoch's own figure (first decisive epoch)."""
        if self.scale is not None:
            return
        world = self.shape.world_size
        if _close(raw, figure):
            self.scale = 1.0
            declared = " although it declares a local_batch_size" if self.local_declared else ""
            self.scale_note = f"printed throughput is global{declared}: an epoch's time stamps x the data set give "
            self.scale_note += f"{figure:.6g} samples/s against {raw:.6g} printed"
        elif world > 1 and _close(raw * world, figure):
            self.scale = float(world)
            self.scale_note = (
                f"printed throughput is per device (x {world}): an epoch's time stamps x the data set give "
                f"{figure:.6g} samples/s against {raw:.6g} printed"
            )

    def _tracked(self, value: dict[str, Any], metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        point = self._tracked_point(value, metadata, stamp)
        if point is None:
            return
        if self.stopped or isinstance(metadata.get("step"), list):  # a whole-run summary after the run
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

    def _tracked_point(self, value: dict[str, Any], metadata: dict[str, Any], stamp: float) -> Point | None:
        """A `tracked_stats` event's point: its throughput (scaled to global) or step time (None: neither)."""
        speed = _number(value.get("throughput"))
        step_key = _step_key(value)
        seconds = _number(value.get(step_key)) if step_key else None
        if speed is None and seconds is None:
            return None
        check = self._epoch_check(speed)
        done, count_note = self._progress_samples(metadata) or (None, None)
        speed, note = (speed * self._scale(), self.scale_note) if speed is not None else (None, None)
        return Point(
            step=self.index + 1,
            speed=speed,
            seconds=seconds,
            batch=self.batch,  # a step time alone is timed as every format's: samples over the summed time
            timestamp=stamp,
            samples=done,
            check=self._checked(check, done, stamp),
            note=count_note or note,
            tokens=self.tokens_per_sample(),
        )

    def _epoch_check(self, speed: float | None) -> float | None:
        """The last finished epoch's own figure checks the next printed throughput (and decides its scale)."""
        if speed is None or self.epoch_figure is None:
            return None
        self._decide_scale(speed, self.epoch_figure)
        check, self.epoch_figure = self.epoch_figure, None
        return check

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
        if self.benchmark in FRACTION_EPOCHS and done:
            return self._since_start(done, stamp)
        if done is None or self.previous is None or self.eval_since:
            return None
        then, before = self.previous
        return (done - before) / (stamp - then) if stamp > then and done > before else None

    def _since_start(self, done: float, stamp: float) -> float | None:
        start = self.first_epoch_start or self.run_start
        return done / (stamp - start) if start is not None and stamp > start else None

    def _progress_samples(self, metadata: dict[str, Any]) -> tuple[float | None, str | None] | None:
        """The event's cumulative sample count: bert's epoch_num, step_num x batch, or a step count in tokens,
        samples or a fraction of an epoch."""
        if self.epoch_size() is not None or (self.benchmark and not self.counts_samples()):
            return None  # `step` is the epoch number: the epoch's own time stamps are the second reading
        if (count := _number(metadata.get("epoch_num"))) is not None:
            return self.samples(count)
        if (count := _number(metadata.get("step_num"))) is not None:
            return count * self.batch, None
        if (count := _number(metadata.get("step"))) is not None:
            return self._step_samples(count)
        return None

    def _step_samples(self, count: float) -> tuple[float | None, str | None] | None:
        """A progress event's `step`: tokens or a fraction of the data where the benchmark (or the step's size)
        says so, samples where it counts samples or steps one global batch at a time, else not a count."""
        delta = count - (self.last_count or 0.0)
        self.last_count = count
        if self.benchmark in FRACTION_EPOCHS | TOKEN_COUNTED or self._token_sized(delta):
            return self.samples(count, delta)
        if self.benchmark in SAMPLE_COUNTED or abs(delta - self.batch) < 1e-6 * self.batch:
            return count, None
        return None

    def _whole_run(self, point: Point, value: dict[str, Any]) -> Point:
        """A figure for the whole run after run_stop: a token rate (gpt3's) is converted to sequences."""
        if point.speed is not None and self.seq_len and self.benchmark in TOKEN_COUNTED and "throughput" in value:
            note = f"whole-run figure in tokens/s including evaluation, / {self.seq_len:g} tokens per sequence"
            return replace(point, speed=point.speed / self.seq_len, note=note)
        return point

    # --- timed blocks -------------------------------------------------------------------------------------------
    def _block_start(self, metadata: dict[str, Any], stamp: float) -> None:
        first, count = _number(metadata.get("first_epoch_num")), _number(metadata.get("epoch_count"))
        begin = size = None
        if first is not None and count is not None:
            start, _ = self.samples(first, count)
            length, _ = self.samples(count, count)
            if start is not None and length is not None and length >= self.batch:  # a block is at least one step
                begin, size = start, length
        self.marks, self.counted_in_block = [], False
        self.block = _Block(
            stamp=stamp,
            begin=begin,
            size=size,
            first=first if count is not None else None,
            count=_number(metadata.get("samples_count")),
            before=self.cumulative,
        )

    def _block_stop(self, metadata: dict[str, Any], stamp: float) -> Iterator[Point]:
        if (point := self._interval(metadata, stamp)) is not None:
            yield from self._emit(point)

    def _interval(self, metadata: dict[str, Any], stamp: float) -> Point | None:
        """The figure of the timed interval (block, or epoch where the log times no blocks) that ends here."""
        block, self.block = self.block, None
        if self.tracked:
            return None
        start_time = self._block_began(block)
        begin, end, note = self._block_span(metadata, block)
        if end is not None:
            self.last_stop = (stamp, end)
        if start_time is None or begin is None or end is None or stamp <= start_time or end <= begin:
            return None
        return Point(
            step=self.index + 1,
            speed=(end - begin) / (stamp - start_time),
            timestamp=stamp,
            samples=end,
            check=self._marks_figure(start_time, stamp),
            note=note or self._block_note(),
            tokens=self.tokens_per_sample(),
        )

    def _marks_figure(self, start: float, stop: float) -> float | None:
        """The block's second reading: the counts its evaluations logged inside it over their time stamps (a block
        whose samples_count or statement disagrees with them by a factor makes the log contradict itself)."""
        inside = [(t, n) for t, n in self.marks if start <= t <= stop]
        if len(inside) < 2:
            return None
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 and n1 > n0 else None

    def _block_began(self, block: _Block | None) -> float | None:
        """When a block began: its block_start, else the last block's end, else the run's start."""
        if block:
            return block.stamp
        return self.last_stop[0] if self.last_stop else self.run_start

    def _block_note(self) -> str | None:
        if self.evaluated and not self.timed_eval:
            return "timed blocks: the log times no evaluation apart, so a block may include it"
        return None

    def _block_span(
        self, metadata: dict[str, Any], block: _Block | None
    ) -> tuple[float | None, float | None, str | None]:
        """The samples a finished block covers (begin, end) and a note where its own statement is overruled: the
        count at its stop (`samples_count`), else the count the log's events reached inside it (MLPerf's count of
        what a run trained is its last evaluation's), else what the block states (`first_epoch_num` +
        `epoch_count`, the planned length up to the next evaluation, or Habana's iteration counters)."""
        before = self.last_stop[1] if self.last_stop else None
        if (count := _number(metadata.get("samples_count"))) is not None:  # cumulative samples at the block's end
            return _first_known(before, block and block.count), count, None
        stated = block.stated_span() if block else None
        if self.counted_in_block and self.cumulative is not None:  # counted inside it (bert's epoch_num, evaluations)
            begin, end = _first_known(before, block and block.before), self.cumulative
            return begin, end, self._overruled(stated, end - begin)
        return self._stated_span(metadata, block, stated)

    def _stated_span(
        self, metadata: dict[str, Any], block: _Block | None, stated: tuple[float, float] | None
    ) -> tuple[float | None, float | None, str | None]:
        """What the block states it covers: `first_epoch_num` + `epoch_count`, the planned length up to the next
        evaluation, or Habana's iteration counters."""
        if block is None:
            return None, None, None
        span = stated or block.iterations_span(_number(metadata.get("first_epoch_num")), self.batch)
        return (*span, None) if span else (None, None, None)

    def _overruled(self, stated: tuple[float, float] | None, counted: float) -> str | None:
        if stated is None or _close(stated[1] - stated[0], counted):
            return None
        unit = "sequences" if self.benchmark in TOKEN_COUNTED else "samples"
        return (
            f"a timed block states {stated[1] - stated[0]:.6g} {unit} (epoch_count) but the log's evaluations count "
            f"{counted:.6g} by its stop: counted those (MLPerf counts a run by its evaluations)"
        )

    # --- emitting -----------------------------------------------------------------------------------------------
    def _emit(self, point: Point) -> Iterator[Point]:
        """Points one by one; the first is held, so that a log with one figure gives it as the whole run's."""
        self.index += 1
        point = replace(point, step=self.index, unit=UNITS.get(self.benchmark))
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
            for epoch in self.epochs:
                yield from self._emit(epoch)
        if self.held is not None and self.index == 1:
            yield self._alone(self.held)
        elif self.held is not None:
            yield self.held
        elif self.index == 0 and self.summary is not None:
            yield replace(self._alone(self.summary), unit=UNITS.get(self.benchmark))

    def _alone(self, point: Point) -> Point:
        """The only figure of the log stands for the whole run: no warm-up can be left out of it."""
        parts = ["one figure for the whole run, taken as it is (no warm-up can be left out)"]
        if self.evaluated:
            parts.append("it includes evaluation")
        if point.note:
            parts.append(point.note)
        return replace(point, step=1, start=1, note="; ".join(parts))


# what each event does beyond the counts and declarations every event is read for
_ON_EVENT: dict[str, Callable[[_Log, Any, dict[str, Any], float], Iterator[Point]]] = {
    "epoch_start": _Log._on_epoch_start,
    "block_start": _Log._on_block_start,
    "block_stop": _Log._on_block_stop,
    "epoch_stop": _Log._on_epoch_stop,
    "throughput": _Log._on_throughput,
    "tracked_stats": _Log._on_tracked_stats,
}


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    log = _Log(shape)
    for line in lines:
        event = _event(line) if PREFIX in line else None
        if event is not None:
            yield from log.feed(event)
    yield from log.finish()


FORMATS = (
    LogFormat(
        name="mlperf",
        description="MLPerf `:::MLLOG {json}` logs (v1.0-v5.x): `tracked_stats` progress, step times, timed blocks "
        "counted in samples, tokens, epochs or iterations, or one whole-run figure; per device or global by evidence",
        signature=re.compile(r":::MLLOG \{"),
        record_start=re.compile(r":::MLLOG \{"),
        success=re.compile(r'"key": "run_stop".*"status": "success"'),
        read=read,
        check_reading="each interval's time stamps x its count (epochs x the data set, samples, tokens / sequence)",
        rules=("printed", "timestamp"),
        warmup=1,
        window=None,
        unit="samples/s",
        steps_are_iterations=False,
        practice="MLPerf publishes time to train only: the mean of the frameworks' own tracked figures (or timed "
        "blocks) after the first; one whole-run figure where that is all the log has (mlperf_logging keys, each "
        "benchmark's counting unit)",
    ),
)
