"""The published rules over iterations, computed while the points stream past (bounded memory).

Three steps, the same for every format:
1. ranks: lines printed by several ranks for the same iteration become one (the median, as the MXNet rule says);
2. runs: a step that goes back (or a new planned length) starts a new run; the last run that gives a figure is
   measured, and the record says how many runs the file held;
3. window: lines whose interval starts before the warm-up iteration are skipped, the next `window` iterations are
   kept; where the log is shorter than the rule asks for, what the rule allows is used and `window_note` says so.
   The framework's own practice (`Point.own`: its last printed step, its running average) is kept beside the
   window's figure, and ranks of one iteration printing figures more than RANK_SPREAD apart are a contradiction the
   record names.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from dlperf.errors import DataError
from dlperf.framework_logs.base import PeerFormat, Point, RunShape
from dlperf.wording import count as counted


@dataclass(frozen=True)
class Measured:
    """One run's throughput (global, in the format's unit) and what it was computed from."""

    throughput: float
    kept: int  # printed lines (one per iteration printed, ranks combined) in the window
    first_step: int | None
    last_step: int | None
    latency_ms: float | None
    memory_mib: float | None
    metrics: dict[str, float]
    window_note: str | None
    runs: int  # runs found in the file; the last one that gave a figure is this one
    rejected_lines: int = 0  # lines (of the whole file) whose figures cannot be a speed, left out
    rejected_reason: str | None = None  # why the first of them was
    second: float | None = None  # the same window by a second reading (None: the log holds none)
    second_reading: str | None = None  # what the second reading is
    notes: tuple[str, ...] = ()  # how the reader decided scale and units
    tokens_per_sample: int | None = None
    unit: str | None = None  # the reader's inferred unit (None: the format's)
    batch_free: bool = False  # the figure is the printed speed, which needs no batch from the file's path
    own: float | None = None  # the framework's own practice's figure for the same run (PeerFormat.own_reading)
    contradictions: tuple[str, ...] = ()  # what in the window disagrees with itself beyond its noise


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _highest(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _median_metrics(points: list[Point]) -> tuple[tuple[str, float], ...]:
    names = {name for p in points for name, _ in p.metrics}
    return tuple((n, statistics.median([v for p in points for m, v in p.metrics if m == n])) for n in names)


RANK_SPREAD = 0.10  # ranks of one synchronous iteration print figures within 10 % (the readings' own tolerance)


def _disagreement(points: list[Point]) -> str | None:
    """Where the ranks printing one iteration disagree beyond RANK_SPREAD: what they printed."""
    figures = (("throughput", [p.speed for p in points]), ("time per iteration", [p.seconds for p in points]))
    for name, values in figures:
        present = [v for v in values if v is not None and math.isfinite(v) and v > 0]
        if len(present) > 1 and max(present) > min(present) * (1 + RANK_SPREAD):
            at = f"iteration {points[0].step}" if points[0].step is not None else "one iteration"
            return (
                f"{len(points)} ranks printing {at} disagree on its {name}: {max(present):.6g} and {min(present):.6g} "
                f"({max(present) / min(present):.3g}x, beyond the {RANK_SPREAD:.0%} ranks of one run differ by); "
                "the median is kept"
            )
    return None


def _combine(points: list[Point]) -> Point:
    """One point for one iteration printed by several ranks: median figures, the latest time stamp."""
    if len(points) == 1:
        return points[0]
    first = points[0]
    return Point(
        disagreement=_disagreement(points),
        step=first.step,
        start=first.start,
        run=first.run,
        speed=_median([p.speed for p in points]),
        seconds=_median([p.seconds for p in points]),
        timestamp=_highest([p.timestamp for p in points]),
        samples=_median([p.samples for p in points]),
        batch=_median([p.batch for p in points]),
        memory_mib=_highest([p.memory_mib for p in points]),
        metrics=_median_metrics(points),
        check=_median([p.check for p in points]),
        note=first.note,
        tokens=first.tokens,
        unit=first.unit,
        resolution=_highest([p.resolution for p in points]),
        own=_median([p.own for p in points]),
    )


# A plausible speed's upper bound, per device. Where the workload's training FLOPs per sample are known (a low
# estimate, so the bound stays loose), no device can beat its peak: the fastest training device's dense FP8 peak is
# about 4.5e15 FLOP/s (B200), so 1e16 FLOP/s per device over the FLOPs per sample is a physical limit. Otherwise the
# fastest real figure among the peer logs bounds it: HugeCTR DLRM at 1.0e7 records/s on ONE GPU
# (tests/unit/test_peers_real.py), so 1e8 samples per second per device is not a training speed; token rates get 100x.
MAX_SAMPLES_PER_S_PER_DEVICE = 1e8
MAX_TOKENS_PER_S_PER_DEVICE = 1e10
MAX_FLOPS_PER_DEVICE = 1e16
# (workload class, name fragments, training FLOPs per sample, low estimates: 3 x forward at the smallest usual input)
FLOPS_PER_SAMPLE = (
    ("a 175B GPT-3 sequence (2048 tokens)", ("gpt3", "gpt-3"), 1e15),
    ("a Llama-2-70B sequence", ("llama2_70b", "llama2-70b", "llama-2-70b"), 5e14),
    ("a BERT-large sequence", ("bert-large", "bert_large", "bert"), 1e11),
    ("a Stable Diffusion image", ("stable-diffusion", "stable_diffusion", "sdxl"), 1e11),
    ("a 3D U-Net volume", ("unet3d",), 1e11),
    ("a detection image (SSD/RetinaNet/Mask R-CNN)", ("retinanet", "ssd", "maskrcnn", "mask-rcnn"), 1e10),
    ("a ResNet image", ("resnet", "rn50", "rn101"), 1e9),
)


def workload_class(fmt: PeerFormat, shape: RunShape) -> tuple[str, float] | None:
    """The workload's class and its FLOPs per sample where the model's name says (not for token rates)."""
    if fmt.unit == "tokens/s" or not shape.workload:
        return None
    name = shape.workload.lower()
    return next(((what, flops) for what, parts, flops in FLOPS_PER_SAMPLE if any(p in name for p in parts)), None)


def speed_bound(fmt: PeerFormat, shape: RunShape) -> float:
    """The highest global speed (in the format's unit) a run of this shape and workload can plausibly print."""
    known = workload_class(fmt, shape)
    if known is not None:
        return MAX_FLOPS_PER_DEVICE / known[1] * shape.world_size
    per_device = MAX_TOKENS_PER_S_PER_DEVICE if fmt.unit == "tokens/s" else MAX_SAMPLES_PER_S_PER_DEVICE
    return per_device * shape.world_size


def _above_bound(fmt: PeerFormat, shape: RunShape) -> str:
    per_device = speed_bound(fmt, shape) / shape.world_size
    known = workload_class(fmt, shape)
    why = f" (1e16 FLOP/s per device over >= {known[1]:g} FLOPs for {known[0]})" if known else ""
    return f"above the plausible {per_device:g} {fmt.unit} per device{why} x {counted(shape.world_size, 'device')}"


MAX_COUNT = 10**15  # iterations a run can count: far beyond any (and exact in a float, unlike a 400-digit counter)


def _count_text(value: int) -> str:
    """A counter for a message: a huge one by its digits, never printed whole."""
    return f"{value}" if abs(value) < 10**20 else f"a {len(str(abs(value)))}-digit number"


def _absurd(point: Point) -> str | None:
    """Why a point's numbers cannot be a run's (a counter beyond any run, a figure that is no finite number)."""
    for name, count in (("iteration counter", point.step), ("interval start", point.start)):
        if count is not None and not -MAX_COUNT <= count <= MAX_COUNT:
            return f"{name} {_count_text(count)} is beyond any run"
    figures = {
        "time stamp": point.timestamp,
        "sample count": point.samples,
        "batch": point.batch,
        "memory": point.memory_mib,
        "second reading": point.check,
        **dict(point.metrics),
    }
    for name, value in figures.items():
        if value is not None and not math.isfinite(value):
            return f"{name} {value!r} is not a finite number"
    if point.samples is not None and point.samples < 0:
        return f"sample count {point.samples!r} is negative"
    if point.batch is not None and point.batch <= 0:
        return f"batch {point.batch!r} is not positive"
    return None


class _Screen:
    """Passes the points whose figures can be a speed; counts and remembers why the others were refused."""

    def __init__(self, fmt: PeerFormat, shape: RunShape) -> None:
        self.fmt, self.shape = fmt, shape
        self.bound = speed_bound(fmt, shape)
        self.samples_bound = MAX_SAMPLES_PER_S_PER_DEVICE * shape.world_size
        self.accepted = self.rejected = 0
        self.first_reason: str | None = None

    def __call__(self, points: Iterable[Point]) -> Iterator[Point]:
        for point in points:
            reason = self._reason(point)
            if reason is None:
                self.accepted += 1
                yield point
                continue
            self.rejected += 1
            if self.first_reason is None:
                at = f"iteration {_count_text(point.step)}" if point.step is not None else "a line"
                self.first_reason = f"{at}: {reason}"

    def _reason(self, point: Point) -> str | None:
        if (absurd := _absurd(point)) is not None:
            return absurd
        tflops = dict(point.metrics).get("tflops_per_device")
        if tflops is not None and tflops * 1e12 > MAX_FLOPS_PER_DEVICE:  # a step timed while only dispatched
            return f"{tflops:.6g} TFLOP/s per device printed: above the physical {MAX_FLOPS_PER_DEVICE / 1e12:g}"
        if point.speed is not None:
            if not (math.isfinite(point.speed) and point.speed > 0):
                return f"throughput {point.speed!r} is not a positive finite number"
            if point.speed > self.bound:
                return f"throughput {point.speed:.6g} is {_above_bound(self.fmt, self.shape)}"
        if point.seconds is not None:
            if not (math.isfinite(point.seconds) and point.seconds > 0):
                return f"time per iteration {point.seconds!r} s is not a positive finite number"
            batch = point.batch or self.shape.global_batch
            if point.speed is None and batch / point.seconds > self.samples_bound:
                return (
                    f"time per iteration {point.seconds:.6g} s means {batch / point.seconds:.6g} "
                    f"samples/s, above the plausible {MAX_SAMPLES_PER_S_PER_DEVICE:g} per device"
                )
        return None


PRECISION = 0.02  # a figure whose printed times' rounding leaves it unknown to more than 2 % is refused
MAX_RANKS = 65536  # lines of one iteration held at once: more ranks than any job has, so memory stays bounded
KEPT_RUNS = 8  # finished runs held for "the last one that gives a figure"


def split_runs(points: Iterable[Point]) -> Iterator[tuple[int, Point]]:
    """(run number, point) with the ranks of one iteration combined.

    Ranks print an iteration close together, so lines of the current or the previous printed step join that
    step; a step below both, or a new `run` key, is a restart.
    """
    run = 0
    groups: dict[int | None, list[Point]] = {}  # at most the two latest printed steps
    key: object = None
    for point in points:
        if groups and _restarts(point, key, groups):
            yield from ((run, _combine(g)) for g in groups.values())
            groups, run = {}, run + 1
        key = point.run
        if point.step in groups and len(groups[point.step]) < MAX_RANKS:
            groups[point.step].append(point)
            continue
        if point.step in groups:  # a degenerate log repeating one step: combine what is held, go on
            yield run, _combine(groups.pop(point.step))
        if len(groups) == 2:
            oldest = next(iter(groups))
            yield run, _combine(groups.pop(oldest))
        groups[point.step] = [point]
    yield from ((run, _combine(g)) for g in groups.values())


def _restarts(point: Point, key: object, groups: dict[int | None, list[Point]]) -> bool:
    """A new `run` key, or a step below both held steps, starts a new run."""
    return point.run != key or (point.step not in groups and _before(point.step, groups))


def _before(step: int | None, groups: dict[int | None, list[Point]]) -> bool:
    steps = [s for s in groups if s is not None]
    return step is not None and bool(steps) and step < max(steps)


class _Window:
    """One run: skips the warm-up, keeps the window; remembers only sums and three points."""

    def __init__(self, fmt: PeerFormat, warmup: int, window: int | None, batch: int) -> None:
        self.fmt, self.warmup, self.window, self.batch = fmt, warmup, window, batch
        self.seen = 0
        self.anchor: Point | None = None  # the last point before the window: where the timestamp rule starts
        self.first: Point | None = None
        self.first_start: int | None = None  # where the first kept line's interval starts
        self.last: Point | None = None
        self.window_start: int | None = None
        self.kept = 0
        self.late = 0  # points after a full window
        self.speed_sum = 0.0
        self.speed_n = 0
        self.timed = TimedSteps()
        self.stamps = _Stamps(fmt, batch)
        self.memory: float | None = None
        self.metric_sums: dict[str, float] = {}
        self.check_sum, self.check_n = 0.0, 0
        self.notes: dict[str, None] = {}
        self.tokens: int | None = None
        self.unit: str | None = None
        self.own: float | None = None
        self.contradictions: dict[str, None] = {}
        self.rate_iterations = self.rate_seconds = 0.0  # rates combined as samples over time (rates_over_time)
        # the latest points and where their intervals start, for the short-log fallback and `last_only`
        self.tail: deque[tuple[Point, int | None]] = deque(maxlen=64)

    def add(self, point: Point, start: int | None) -> None:
        self.seen += 1
        self.tail.append((point, start))
        if point.memory_mib is not None:
            self.memory = max(self.memory or 0.0, point.memory_mib)
        if start is not None and start < self.warmup:
            self.anchor = point
        elif (
            self.window is not None
            and self.window_start is not None
            and start is not None
            and (start >= self.window_start + self.window)
        ):
            self.late += 1
        else:
            if self.window_start is None:
                self.window_start = start
            self._keep(point, start)

    def _keep(self, point: Point, start: int | None) -> None:
        self.stamps.add(self.last or self.anchor, point)
        if self.first is None:
            self.first, self.first_start = point, start
        self.kept += 1
        self.last = point
        if point.speed is not None:
            self.speed_sum += point.speed
            self.speed_n += 1
            if point.speed > 0:  # each line's iterations at its rate: the window's samples over its time
                iterations = max(point.step - start, 1) if point.step is not None and start is not None else 1
                self.rate_iterations += iterations
                self.rate_seconds += iterations / point.speed
        if point.own is not None:
            self.own = point.own
        if point.disagreement is not None and len(self.contradictions) < 3:
            self.contradictions[point.disagreement] = None
        if point.seconds is not None:
            self.timed.add(point, start, self.batch)
        for name, value in point.metrics:
            self.metric_sums[name] = self.metric_sums.get(name, 0.0) + value
        if point.check is not None:
            self.check_sum += point.check
            self.check_n += 1
        if point.note:
            self.notes[point.note] = None
        self.tokens = point.tokens or self.tokens
        self.unit = point.unit or self.unit

    def fallback(self) -> str | None:
        """Where the rule's window is not there: say so, and keep what the rule allows."""
        if self.fmt.last_only and self.kept:
            self._keep_last()
            return None
        if self.kept == 0 and len(self.tail) > 1:
            return self._keep_warmup_end()
        return self._short_window()

    def _keep_last(self) -> None:
        """The last printed line past the warm-up is the figure (a whole-run figure printed at the end)."""
        last = self.tail[-1]
        self._reset()
        self.anchor = self.tail[-2][0] if len(self.tail) > 1 else None
        self._keep(*last)

    def _keep_warmup_end(self) -> str:
        """A run shorter than the warm-up: the later half of what it printed (the warm-up's own end)."""
        tail = list(self.tail)
        half = tail[len(tail) // 2 :]
        self.anchor = tail[len(tail) // 2 - 1][0]
        for point, start in half:
            self._keep(point, start)
        return (
            f"the run prints {self.seen} lines, all inside the {self.warmup}-iteration warm-up: "
            f"kept the later {len(half)} (iterations {half[0][0].step}-{half[-1][0].step})"
        )

    def _short_window(self) -> str | None:
        """The note for a log that ends before the window does."""
        if self.window is None or self.late or self.first is None or self.last is None:
            return None
        span = (self.last.step or 0) - (self.window_start or 0)
        if span < self.window - 1:
            return f"the log ends {span + 1} iterations into the {self.window}-iteration window"
        return None

    def _reset(self) -> None:
        self.kept = self.speed_n = 0
        self.speed_sum = self.rate_iterations = self.rate_seconds = 0.0
        self.own = None
        self.contradictions = {}
        self.timed = TimedSteps()
        self.stamps = _Stamps(self.fmt, self.batch)
        self.metric_sums = {}
        self.check_sum, self.check_n = 0.0, 0
        self.notes = {}
        self.first = self.last = self.first_start = None


class TimedSteps:
    """The one rule for every format that prints a step time (`base.timed_step`): the kept iterations' samples
    over their summed time, never a mean of per-line rates (which weighs the fast lines more)."""

    def __init__(self) -> None:
        self.iterations = self.samples = self.seconds = self.resolution = 0.0

    def add(self, point: Point, start: int | None, batch: int) -> None:
        """A line's time is per iteration over the iterations since its interval's start (one where unknown); its
        rounding as printed (`resolution`) is summed the same way."""
        assert point.seconds is not None
        gap = point.step - start if point.step is not None and start is not None else 1
        iterations = max(gap, 1)
        self.iterations += iterations
        self.samples += (point.batch or batch) * iterations
        self.seconds += point.seconds * iterations
        self.resolution += (point.resolution or 0.0) * iterations

    def rate(self) -> float:
        return self.samples / self.seconds

    def mean_seconds(self) -> float:
        """The mean time per iteration."""
        return self.seconds / self.iterations


class _Stamps:
    """Samples over time stamps between consecutive kept lines, leaving out the intervals in which the framework's
    own step clock stopped (Megatron's evaluation and checkpoint saving): where there were any, the second reading
    the printed figures can be held to."""

    def __init__(self, fmt: PeerFormat, batch: int) -> None:
        self.fmt, self.batch = fmt, batch
        self.samples = self.seconds = 0.0
        self.paused = self.broken = False

    def add(self, previous: Point | None, point: Point) -> None:
        if point.paused:
            self.paused = True
            return
        if previous is None or previous.timestamp is None or point.timestamp is None:
            return
        try:
            self.samples += _samples_between(previous, point, self.fmt, self.batch)
        except DataError:
            self.broken = True
        self.seconds += point.timestamp - previous.timestamp

    def rate(self) -> float | None:
        usable = not self.broken and self.samples > 0 and self.seconds > 0
        return self.samples / self.seconds if usable else None


def _starts(points: Iterator[tuple[int, Point]]) -> Iterator[tuple[int, Point, int | None]]:
    """(run, point, the iteration its interval starts at): printed, else the previous line's step, else the
    step minus the next line's interval (a log that starts mid-run), else the step before."""
    held: tuple[int, Point] | None = None
    previous: tuple[int, Point] | None = None
    for run, point in points:
        if held is not None:
            h_run, h_point = held
            yield h_run, h_point, _start(h_point, None, _gap(h_run, h_point, run, point))
            held = None
        if (previous is None or previous[0] != run) and point.start is None:
            held = previous = (run, point)  # the first line of a run: its interval needs the next line
            continue
        prev_step = previous[1].step if previous is not None and previous[0] == run else None
        yield run, point, _start(point, prev_step, 1)
        previous = (run, point)
    if held is not None:
        yield held[0], held[1], _start(held[1], None, 1)


def _gap(run: int, point: Point, next_run: int, next_point: Point) -> int:
    """Iterations from a point to the next line of the same run (1 where that is unknown)."""
    if run != next_run or point.step is None or next_point.step is None:
        return 1
    return next_point.step - point.step


def _start(point: Point, prev_step: int | None, gap: int) -> int | None:
    if point.start is not None:
        return point.start
    if point.step is None:
        return None
    return prev_step if prev_step is not None else point.step - max(gap, 1)


def measure(
    points: Iterable[Point],
    fmt: PeerFormat,
    rule: str,
    warmup: int,
    window: int | None,
    shape: RunShape,
    on_point: Callable[[], None] | None = None,
) -> Measured:
    """Apply `rule` to the last run in `points` that gives a figure; `on_point()` is called for every point.

    Where the last run's window gives no figure but the run printed its own whole-run figure, that is the figure."""
    screen = _Screen(fmt, shape)
    whole = _WholeRun()
    new_window = functools.partial(_Window, fmt, warmup, window, shape.global_batch)
    done, runs = _windows(whole(screen(_tap(points, on_point))), new_window)
    try:
        _refuse_unmeasurable(done, screen, fmt, warmup)
    except DataError as refusal:
        if whole.point is None:
            raise
        return _screened(_whole_run_figure(whole.point, refusal, fmt, shape, runs), screen)
    error: DataError | None = None
    for w in reversed(done):  # the last run that gives a figure
        try:
            return _screened(_result(w, fmt, rule, shape, runs), screen)
        except DataError as e:
            if w is done[-1] and whole.point is not None:
                return _screened(_whole_run_figure(whole.point, e, fmt, shape, runs), screen)
            error = error or e
    assert error is not None
    raise error


def _screened(measured: Measured, screen: _Screen) -> Measured:
    return replace(measured, rejected_lines=screen.rejected, rejected_reason=screen.first_reason)


class _WholeRun:
    """Holds back the run's own whole-run figure (a summary after its last line); a later progress line means a
    new run, whose figure that is not."""

    def __init__(self) -> None:
        self.point: Point | None = None

    def __call__(self, points: Iterable[Point]) -> Iterator[Point]:
        for point in points:
            if point.whole_run:
                self.point = point
                continue
            self.point = None
            yield point


def _whole_run_figure(point: Point, why: DataError, fmt: PeerFormat, shape: RunShape, runs: int) -> Measured:
    """The run's own figure for all of it, where the rule's window gives none: said so in the record."""
    assert point.speed is not None  # a reader's whole-run point carries its figure
    return Measured(
        throughput=_plausible(point.speed, "printed", fmt, shape),
        kept=1,
        first_step=None,
        last_step=None,
        latency_ms=None,
        memory_mib=point.memory_mib,
        metrics={},
        window_note=f"the rule's window gives no figure ({why}): took the run's own whole-run figure",
        runs=max(runs, 1),
        notes=(point.note,) if point.note else (),
        unit=point.unit,
        batch_free=True,
    )


def _windows(points: Iterable[Point], new_window: Callable[[], _Window]) -> tuple[deque[_Window], int]:
    """The last KEPT_RUNS runs' windows, and how many runs the points held."""
    done: deque[_Window] = deque(maxlen=KEPT_RUNS)
    current: _Window | None = None
    current_run, runs = -1, 0
    for run, point, start in _starts(split_runs(points)):
        if current is None or run != current_run:
            if current is not None:
                done.append(current)
            current, current_run = new_window(), run
            runs += 1
        current.add(point, start)
    if current is not None:
        done.append(current)
    return done, runs


def _refuse_unmeasurable(done: deque[_Window], screen: _Screen, fmt: PeerFormat, warmup: int) -> None:
    """No figure can come: every line refused, no progress lines, or all of them inside the warm-up."""
    if screen.rejected and not screen.accepted:
        raise DataError(f"all {screen.rejected} throughput lines rejected ({screen.first_reason})")
    if not done:
        raise DataError(f"no {fmt.name} progress lines in it")
    if all(w.kept == 0 and w.seen < 2 for w in done):
        raise DataError(
            f"only {sum(w.seen for w in done)} {fmt.name} progress line(s), inside the {warmup}-iteration warm-up: "
            f"the run is too short, or pass a smaller warm-up (extract: --warmup; run: --log-warmup)"
        )


def _tap(points: Iterable[Point], on_point: Callable[[], None] | None) -> Iterator[Point]:
    """The reader's points; a number no arithmetic can take (a 400-digit counter made a float) refuses the log."""
    try:
        for point in points:
            if on_point is not None:
                on_point()
            yield point
    except (OverflowError, ValueError) as error:
        raise DataError(f"a number in the log is out of any range ({error}): not a log of a run") from None


def _result(w: _Window, fmt: PeerFormat, rule: str, shape: RunShape, runs: int) -> Measured:
    note = w.fallback()
    if w.kept == 0:
        raise DataError(f"its only {fmt.name} progress line is inside the {w.warmup}-iteration warm-up")
    if rule == "printed" and fmt.stamps_when_unprinted and not w.timed.seconds and not w.speed_n:
        rule = "timestamp"  # no line prints a figure (DeepSpeed's `step=` lines alone): their time stamps do
        note = "; ".join(filter(None, [note, f"no kept {fmt.name} line prints a figure: read by its time stamps"]))
    throughput = _plausible(_printed(w, fmt) if rule == "printed" else _timestamped(w, fmt, shape), rule, fmt, shape)
    metrics = {name: total / w.kept for name, total in w.metric_sums.items()}
    second, reading = _second(w, fmt, rule, shape)
    return Measured(
        second=second,
        second_reading=reading,
        notes=tuple(w.notes),
        tokens_per_sample=w.tokens,
        unit=w.unit,
        batch_free=rule == "printed" and fmt.printed_from == "speed" and w.speed_n == w.kept,
        own=w.own,
        contradictions=tuple(w.contradictions),
        throughput=throughput,
        kept=w.kept,
        first_step=w.first.step if w.first else None,
        last_step=w.last.step if w.last else None,
        latency_ms=w.timed.mean_seconds() * 1000 if w.timed.iterations else None,
        memory_mib=w.memory,
        metrics=metrics,
        window_note=note,
        runs=runs,
    )


def _plausible(throughput: float, rule: str, fmt: PeerFormat, shape: RunShape) -> float:
    """The rule's figure, refused where it cannot be a speed."""
    if not (math.isfinite(throughput) and throughput > 0):
        raise DataError(f"the {rule} rule gives a throughput of {throughput!r}: the kept lines hold no usable figures")
    if throughput > speed_bound(fmt, shape):
        raise DataError(
            f"the {rule} rule gives {throughput:.6g}, {_above_bound(fmt, shape)}: the kept lines' figures are wrong"
        )
    return throughput


def _second(w: _Window, fmt: PeerFormat, rule: str, shape: RunShape) -> tuple[float | None, str | None]:
    """The window's figure by a reading other than `rule`: the reader's own second reading of every kept interval
    (an epoch's time stamps x the data set), else the other rule where the lines carry what it needs and cover the
    same iterations."""
    if w.check_n and w.check_n * 2 >= w.kept:  # intervals with evaluation inside have no check of their own
        return w.check_sum / w.check_n, fmt.check_reading
    other = "timestamp" if rule == "printed" else "printed"
    if other == "timestamp" and _stamps_miss_iterations(w):
        return None, None
    if other == "timestamp" and w.stamps.paused:
        reading = "time stamps x sample counts of the intervals without evaluation or checkpoint saving"
        return (w.stamps.rate(), reading) if w.stamps.rate() is not None else (None, None)
    try:
        figure = _timestamped(w, fmt, shape) if other == "timestamp" else _printed(w, fmt)
    except DataError:
        return None, None
    if not (math.isfinite(figure) and figure > 0):
        return None, None
    return figure, _reading_of(other, w)


def _stamps_miss_iterations(w: _Window) -> bool:
    """The printed figures time iterations before the first stamp the timestamp rule has (Megatron's line after
    its first iteration averages from the run's start): the two readings do not cover the same iterations."""
    anchor = w.anchor
    return anchor is not None and anchor.step is not None and w.first_start is not None and w.first_start < anchor.step


def _reading_of(rule: str, w: _Window) -> str:
    """What the `rule` read in this window, said for the record."""
    if rule != "timestamp":
        return "the printed figures"
    if w.last is not None and w.last.samples is not None:
        return "time stamps x sample counts"
    return "time stamps x iterations x the given global batch"


def _printed(w: _Window, fmt: PeerFormat) -> float:
    """The mean printed throughput (the DLPerf reports' rule for their formats); for formats that print a time per
    iteration, the kept iterations' samples over their summed time (`TimedSteps`); for formats whose rates combine
    over time (`rates_over_time`: torchtitan, MaxText, torchtune), each line's iterations at its rate."""
    if fmt.printed_from == "seconds" or not w.speed_n:
        if not w.timed.seconds > 0:
            hint = ": use --rule timestamp" if "timestamp" in fmt.rules else ""
            raise DataError(f"the kept {fmt.name} lines print no usable throughput or time per iteration{hint}")
        _precise(
            w.timed.resolution / w.timed.seconds,
            f"their times per iteration (mean {w.timed.mean_seconds():.4g} s)",
            fmt,
        )
        return w.timed.rate()
    if fmt.rates_over_time:
        return w.rate_iterations / w.rate_seconds
    return w.speed_sum / w.speed_n


def _timestamped(w: _Window, fmt: PeerFormat, shape: RunShape) -> float:
    first, last = w.anchor or w.first, w.last
    assert first is not None and last is not None  # at least one point was kept
    if first is last:
        raise DataError(f"the timestamp rule needs two lines but only one {fmt.name} line is there: use --rule printed")
    if first.timestamp is None or last.timestamp is None:
        raise DataError(f"these {fmt.name} lines carry no time stamps: use --rule printed")
    elapsed = last.timestamp - first.timestamp
    if elapsed > 0 and (first.resolution or last.resolution):
        _precise(((first.resolution or 0.0) + (last.resolution or 0.0)) / elapsed, f"{elapsed:.4g} s between them", fmt)
    samples = _samples_between(first, last, fmt, shape.global_batch)
    if elapsed <= 0 or samples <= 0:
        raise DataError(
            f"time stamps or iterations do not advance between the first and last kept line "
            f"({elapsed:g} s, {samples:g} samples)"
        )
    return samples / elapsed


class CoarseLines(DataError):
    """A figure the printed times' rounding leaves unknown beyond PRECISION: the caller adds what else the user can
    do (`dlperf extract`: run the script under `dlperf run --command`; a run with the hook off: turn it on)."""


def _precise(bound: float, what: str, fmt: PeerFormat) -> None:
    """Refuse a figure the printed times' rounding leaves unknown to more than PRECISION."""
    if bound > PRECISION:
        raise CoarseLines(
            f"the kept {fmt.name} lines are printed too coarsely for a figure: rounded as printed, {what} are known to "
            f"+-{bound:.1%}, over dlperf's {PRECISION:.0%}; run it longer or with slower steps"
        )


def _samples_between(first: Point, last: Point, fmt: PeerFormat, batch: int) -> float:
    """Samples trained between two points: by their sample counts, else by iterations x the global batch."""
    if first.samples is not None and last.samples is not None:
        return last.samples - first.samples
    if fmt.steps_are_iterations and first.step is not None and last.step is not None:
        return (last.step - first.step) * batch
    raise DataError(f"these {fmt.name} lines carry no iteration or sample counts: use --rule printed")
