"""The window over one run: the warm-up's lines skipped, the next `window` iterations kept as running sums (bounded
memory), and what the rule allows where the log is shorter than the rule asks for. The first lines past the
warm-up count are held back (settle.SETTLE_LINES at most) until the steady-state test places the window's start
(settle.py): those before the lines settle are warm-up too."""

from __future__ import annotations

from collections import deque

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, Point
from dlperf.framework_logs.settle import SETTLE_LINES, Line, Settled, settle


class Window:
    """One run: skips the warm-up, keeps the window; remembers only sums and three points."""

    def __init__(self, fmt: LogFormat, warmup: int, window: int | None, batch: int, settles: bool = True) -> None:
        self.fmt, self.warmup, self.window, self.batch = fmt, warmup, window, batch
        self.seen = 0
        self.anchor: Point | None = None  # the last point before the window: where the timestamp rule starts
        self.window_start: int | None = None
        self.late = 0  # points after a full window
        self.memory: float | None = None
        self.tokens: int | None = None
        self.unit: str | None = None
        self._reset()
        # the latest points and where their intervals start, for the short-log fallback and `last_only`
        self.tail: deque[tuple[Point, int | None]] = deque(maxlen=64)
        # the first lines past the count, held until settle.py places the window (None: placed, or not tested)
        self.settles = settles and fmt.settles and not fmt.last_only  # a whole-run figure has no warm-up to find
        self.pending: list[tuple[Point, int | None]] | None = [] if self.settles else None
        self.settled: str | None = None  # what the test found, for the record (None: nothing to say)
        self.found = warmup  # the iteration the window starts after: the count, or where the test moved it

    def add(self, point: Point, start: int | None) -> None:
        self.seen += 1
        self.tail.append((point, start))
        if point.memory_mib is not None:
            self.memory = max(self.memory or 0.0, point.memory_mib)
        if start is not None and start < self.warmup:
            self.anchor = point
        elif self.pending is not None:
            self.pending.append((point, start))
            if len(self.pending) == SETTLE_LINES:
                self.finish()
        else:
            self._place(point, start)

    def finish(self) -> None:
        """Place the held lines: the steady-state test's warm-up moves the anchor, the rest go in the window."""
        if self.pending:
            self._settle(self.pending)
        self.pending = None

    def _settle(self, held: list[tuple[Point, int | None]]) -> None:
        found = settle(self._lines(held), self.warmup) if self.settles else Settled(0, None)
        self.settled = found.note
        if found.drop:
            self.anchor = held[found.drop - 1][0]
            self.found = self.anchor.step
        self.pending = None
        for point, start in held[found.drop :]:
            self._place(point, start)

    def _lines(self, held: list[tuple[Point, int | None]]) -> list[Line]:
        """The held lines as the test sees them: each one's printed rate, else its samples over the time since the
        line before (the anchor for the first)."""
        lines, previous = [], self.anchor
        for point, start in held:
            lines.append(Line(point.step, iterations_of(point, start), self._rate(previous, point)))
            previous = point
        return lines

    def _rate(self, previous: Point | None, point: Point) -> float | None:
        if point.speed is not None and point.speed > 0:
            return point.speed
        if point.seconds is not None and point.seconds > 0:
            return (point.batch or self.batch) / point.seconds
        return self._stamped_rate(previous, point)

    def _stamped_rate(self, previous: Point | None, point: Point) -> float | None:
        """Samples over the time stamps since the line before (none across a pause of the framework's clock)."""
        if previous is None or previous.timestamp is None or point.timestamp is None or point.paused:
            return None
        try:
            samples = samples_between(previous, point, self.fmt, self.batch)
        except DataError:
            return None
        elapsed = point.timestamp - previous.timestamp
        return samples / elapsed if samples > 0 and elapsed > 0 else None

    def _place(self, point: Point, start: int | None) -> None:
        """A line past the warm-up: in the window, or after it."""
        if (
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
            self._keep_speed(point.speed, point, start)
        if point.seconds is not None:
            self.timed.add(point, start, self.batch)
        if point.check is not None:
            self.check_sum += point.check
            self.check_n += 1
        self._keep_context(point)

    def _keep_speed(self, speed: float, point: Point, start: int | None) -> None:
        self.speed_sum += speed
        self.speed_n += 1
        if speed > 0:  # each line's iterations at its rate: the window's samples over its time
            iterations = iterations_of(point, start)
            self.rate_iterations += iterations
            self.rate_seconds += iterations / speed

    def _keep_context(self, point: Point) -> None:
        """What the kept line says beside its figures: the framework's own figure, metrics, notes, units."""
        if point.own is not None:
            self.own = point.own
        if point.disagreement is not None and len(self.contradictions) < 3:
            self.contradictions[point.disagreement] = None
        for name, value in point.metrics:
            self.metric_sums[name] = self.metric_sums.get(name, 0.0) + value
        if point.note:
            self.notes[point.note] = None
        self.tokens = point.tokens or self.tokens
        self.unit = point.unit or self.unit

    @property
    def first_step(self) -> int | None:
        return self.first.step if self.first else None

    @property
    def last_step(self) -> int | None:
        return self.last.step if self.last else None

    @property
    def latency_ms(self) -> float | None:
        """The kept lines' mean printed time per iteration (None: none prints one)."""
        return self.timed.mean_seconds() * 1000 if self.timed.iterations else None

    @property
    def metrics(self) -> dict[str, float]:
        """The kept lines' extra figures, each the mean over the kept lines."""
        return {name: total / self.kept for name, total in self.metric_sums.items()}

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
        self._settle(half)
        return (
            f"the run prints {self.seen} lines, all inside the {self.warmup}-iteration warm-up: "
            f"kept the later {self.kept} (iterations {self.first_step}-{self.last_step})"
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
        """The kept lines' sums, none kept yet."""
        self.kept = self.speed_n = 0
        self.speed_sum = 0.0
        self.rate_iterations = self.rate_seconds = 0.0  # rates combined as samples over time (rates_over_time)
        self.own: float | None = None
        self.contradictions: dict[str, None] = {}
        self.timed = TimedSteps()
        self.stamps = Stamps(self.fmt, self.batch)
        self.metric_sums: dict[str, float] = {}
        self.check_sum, self.check_n = 0.0, 0
        self.notes: dict[str, None] = {}
        self.first: Point | None = None
        self.last: Point | None = None
        self.first_start: int | None = None  # where the first kept line's interval starts


def iterations_of(point: Point, start: int | None) -> int:
    """The iterations a line's interval covers: from its start to its step (one where unknown)."""
    return max(point.step - start, 1) if point.step is not None and start is not None else 1


class TimedSteps:
    """The one rule for every format that prints a step time (`Point.seconds`): the kept iterations' samples
    over their summed time, never a mean of per-line rates (which weighs the fast lines more)."""

    def __init__(self) -> None:
        self.iterations = self.samples = self.seconds = self.resolution = 0.0

    def add(self, point: Point, start: int | None, batch: int) -> None:
        """A line's time is per iteration over the iterations since its interval's start (one where unknown); its
        rounding as printed (`resolution`) is summed the same way."""
        assert point.seconds is not None
        iterations = iterations_of(point, start)
        self.iterations += iterations
        self.samples += (point.batch or batch) * iterations
        self.seconds += point.seconds * iterations
        self.resolution += (point.resolution or 0.0) * iterations

    def rate(self) -> float:
        return self.samples / self.seconds

    def mean_seconds(self) -> float:
        """The mean time per iteration."""
        return self.seconds / self.iterations


class Stamps:
    """Samples over time stamps between consecutive kept lines, leaving out the intervals in which the framework's
    own step clock stopped (Megatron's evaluation and checkpoint saving): where there were any, the second reading
    the printed figures can be held to."""

    def __init__(self, fmt: LogFormat, batch: int) -> None:
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
            self.samples += samples_between(previous, point, self.fmt, self.batch)
        except DataError:
            self.broken = True
        self.seconds += point.timestamp - previous.timestamp

    def rate(self) -> float | None:
        usable = not self.broken and self.samples > 0 and self.seconds > 0
        return self.samples / self.seconds if usable else None


def samples_between(first: Point, last: Point, fmt: LogFormat, batch: int) -> float:
    """Samples trained between two points: by their sample counts, else by iterations x the global batch."""
    if first.samples is not None and last.samples is not None:
        return last.samples - first.samples
    if fmt.steps_are_iterations and first.step is not None and last.step is not None:
        return (last.step - first.step) * batch
    raise DataError(f"these {fmt.name} lines carry no iteration or sample counts{fmt.instead_of('timestamp')}")
