"""Which run each point belongs to and where its interval starts: a step that goes back (or a new planned length)
starts a new run; lines of several ranks for one iteration are combined on the way (ranks.combine)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import Point
from dlperf.framework_logs.ranks import combine

MAX_RANKS = 65536  # lines of one iteration held at once: more ranks than any job has, so memory stays bounded


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
            yield from ((run, combine(g)) for g in groups.values())
            groups, run = {}, run + 1
        key = point.run
        if point.step in groups and len(groups[point.step]) < MAX_RANKS:
            groups[point.step].append(point)
            continue
        if point.step in groups:  # a degenerate log repeating one step: combine what is held, go on
            yield run, combine(groups.pop(point.step))
        if len(groups) == 2:
            oldest = next(iter(groups))
            yield run, combine(groups.pop(oldest))
        groups[point.step] = [point]
    yield from ((run, combine(g)) for g in groups.values())


def _restarts(point: Point, key: object, groups: dict[int | None, list[Point]]) -> bool:
    """A new `run` key, or a step below both held steps, starts a new run."""
    return point.run != key or (point.step not in groups and _before(point.step, groups))


def _before(step: int | None, groups: dict[int | None, list[Point]]) -> bool:
    steps = [s for s in groups if s is not None]
    return step is not None and bool(steps) and step < max(steps)


def with_starts(points: Iterator[tuple[int, Point]]) -> Iterator[tuple[int, Point, int | None]]:
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
