"""The published rules over iterations, computed while the points stream past (bounded memory): the steps below
in order, each in its own module; this one runs them and keeps the last run that gives a figure.

The steps, the same for every format:
0. screen: lines whose figures cannot be a speed are left out and counted (screen.py, plausibility.py);
1. ranks: lines printed by several ranks for the same iteration become one (the median, as the MXNet rule says:
   ranks.py);
2. runs: a step that goes back (or a new planned length) starts a new run (runs.py); the last run that gives a
   figure is measured, and the record says how many runs the file held;
3. window (window.py): lines whose interval starts before the warm-up iteration are skipped, and so are the
   next lines until their step times settle (settle.py, the steady-state test); the next `window` iterations are
   kept; where the log is shorter than the rule asks for, what the rule allows is used and `window_note` says so.
   The framework's own practice (`Point.own`: its last printed step, its running average) is kept beside the
   window's figure, and ranks of one iteration printing figures more than ranks.RANK_SPREAD apart are a
   contradiction the record names.
4. rule (rules.py): the window's figure by the rule asked for, and by the other reading beside it.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from dlperf.errors import DataError
from dlperf.framework_logs import rules
from dlperf.framework_logs.base import LogFormat, Point, RunShape
from dlperf.framework_logs.rules import CoarseLines
from dlperf.framework_logs.runs import split_runs, with_starts
from dlperf.framework_logs.screen import Screen, plausible
from dlperf.framework_logs.window import Window
from dlperf.records.schema import GIVEN_BATCH_NOTE

__all__ = ["CoarseLines", "Measured", "measure"]

KEPT_RUNS = 8  # finished runs held for "the last one that gives a figure"


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
    own: float | None = None  # the framework's own practice's figure for the same run (LogFormat.own_reading)
    contradictions: tuple[str, ...] = ()  # what in the window disagrees with itself beyond its noise
    warmup: int | None = None  # the iteration the window starts after: the count, or where the steady test moved it


def measure(
    points: Iterable[Point],
    fmt: LogFormat,
    rule: str,
    warmup: int,
    window: int | None,
    shape: RunShape,
    on_point: Callable[[], None] | None = None,
    settles: bool = True,
) -> Measured:
    """Apply `rule` to the last run in `points` that gives a figure; `on_point()` is called for every point.
    `settles`: the window starts where the lines settle past `warmup` (False: at `warmup`, a window already placed).

    Where the last run's window gives no figure but the run printed its own whole-run figure, that is the figure."""
    screen = Screen(fmt, shape)
    whole = _WholeRun()
    new_window = functools.partial(Window, fmt, warmup, window, shape.global_batch, settles)
    done, runs = _windows(whole(screen(_tap(points, on_point))), new_window)
    try:
        _refuse_unmeasurable(done, screen, fmt, warmup)
    except DataError as refusal:
        if whole.point is None:
            raise
        return _screened(_whole_run_figure(whole.point, refusal, fmt, shape, (runs, warmup)), screen)
    error: DataError | None = None
    for w in reversed(done):  # the last run that gives a figure
        try:
            return _screened(_result(w, fmt, rule, shape, runs), screen)
        except DataError as e:
            if w is done[-1] and whole.point is not None:
                return _screened(_whole_run_figure(whole.point, e, fmt, shape, (runs, warmup)), screen)
            error = error or e
    assert error is not None
    raise error


def _screened(measured: Measured, screen: Screen) -> Measured:
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


def _whole_run_figure(
    point: Point, why: DataError, fmt: LogFormat, shape: RunShape, counts: tuple[int, int]
) -> Measured:
    """The run's own figure for all of it, where the rule's window gives none: said so in the record. `counts`: the
    runs in the file and the warm-up count the rule asked for."""
    assert point.speed is not None  # a reader's whole-run point carries its figure
    runs, warmup = counts
    return Measured(
        throughput=plausible(point.speed, "printed", fmt, shape),
        kept=1,
        first_step=None,
        last_step=None,
        latency_ms=None,
        memory_mib=point.memory_mib,
        metrics={},
        window_note=f"the rule's window gives no figure ({why}): took the run's own whole-run figure",
        runs=max(runs, 1),
        warmup=warmup,
        notes=(point.note,) if point.note else (),
        unit=point.unit,
        batch_free=True,
    )


def _windows(points: Iterable[Point], new_window: Callable[[], Window]) -> tuple[deque[Window], int]:
    """The last KEPT_RUNS runs' windows, and how many runs the points held."""
    done: deque[Window] = deque(maxlen=KEPT_RUNS)
    current: Window | None = None
    current_run, runs = -1, 0
    for run, point, start in with_starts(split_runs(points)):
        if current is None or run != current_run:
            if current is not None:
                current.finish()
                done.append(current)
            current, current_run = new_window(), run
            runs += 1
        current.add(point, start)
    if current is not None:
        current.finish()
        done.append(current)
    return done, runs


def _refuse_untimed(screen: Screen, fmt: LogFormat, warmup: int) -> None:
    """A time per iteration printed as 0 past the warm-up, where the figure comes from the printed times: the steps
    are faster than the log's printed resolution can time, and a figure from the lines around them would be a
    guess (a tiny model printing `Time 0.000`). Where the figure is the printed speed, such a line is one bad line."""
    if fmt.printed_from != "seconds":
        return
    past = [step for step in screen.zero_time_steps if step > warmup]
    if past:
        raise DataError(
            f"{len(past)} {fmt.name} line(s) past the {warmup}-iteration warm-up print a time per iteration of 0 "
            f"(iteration {past[0]} first): its steps are faster than the log's printed resolution can time; "
            "give each step more work or print finer times"
        )


def _refuse_unmeasurable(done: deque[Window], screen: Screen, fmt: LogFormat, warmup: int) -> None:
    """No figure can come: every line refused, no progress lines, times printed as 0 past the warm-up, or all the
    lines inside the warm-up."""
    if screen.rejected and not screen.accepted:
        raise DataError(f"all {screen.rejected} throughput lines rejected ({screen.first_reason})")
    if not done:
        raise DataError(f"no {fmt.name} progress lines in it")
    _refuse_untimed(screen, fmt, warmup)
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


def _given_batch(w: Window, fmt: LogFormat, rule: str, shape: RunShape) -> str | None:
    """Where the figure counts the given global batch because the kept lines print none: said so, for the record
    and the report (`batch_given`)."""
    last = w.last
    if last is None:
        return None
    if rule == "timestamp":
        given = last.samples is None and fmt.steps_are_iterations
    else:
        given = fmt.printed_from == "seconds" and not fmt.batch_free and last.seconds is not None and last.batch is None
    if not given:
        return None
    return (
        f"{GIVEN_BATCH_NOTE} {shape.global_batch} ({shape.global_batch // shape.world_size} per device x "
        f"{shape.world_size}, from the file's path or --batch-size): no kept line prints its own"
    )


def _result(w: Window, fmt: LogFormat, rule: str, shape: RunShape, runs: int) -> Measured:
    """The window's figure by the rule (refused where it cannot be a speed), the other reading beside it."""
    note = w.fallback()
    if w.kept == 0:
        raise DataError(f"its only {fmt.name} progress line is inside the {w.warmup}-iteration warm-up")
    used = rules.applied(w, fmt, rule)
    if used != rule:
        note = "; ".join(filter(None, [note, f"no kept {fmt.name} line prints a figure: read by its time stamps"]))
    second, reading = rules.second(w, fmt, used, shape)
    return Measured(
        second=second,
        second_reading=reading,
        notes=tuple(note for note in (*w.notes, w.settled, _given_batch(w, fmt, used, shape)) if note),
        warmup=w.found,
        tokens_per_sample=w.tokens,
        unit=w.unit,
        batch_free=rules.batch_free(w, fmt, used),
        own=w.own,
        contradictions=tuple(w.contradictions),
        throughput=plausible(rules.figure(w, fmt, used, shape), used, fmt, shape),
        kept=w.kept,
        first_step=w.first_step,
        last_step=w.last_step,
        latency_ms=w.latency_ms,
        memory_mib=w.memory,
        metrics=w.metrics,
        window_note=note,
        runs=runs,
    )
