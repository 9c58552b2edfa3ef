"""What every peer-log reader shares: the parsed point, the format's description, and small line helpers."""

from __future__ import annotations

import datetime as dt
import functools
import re
import statistics
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from dlperf.errors import DataError

RULES = ("printed", "timestamp")


@dataclass(frozen=True)
class RunShape:
    """What a reader may need from the file's place in the layout to turn its lines into samples/s."""

    global_batch: int
    world_size: int


@dataclass(frozen=True)
class Point:
    """One throughput line of a log: the step it ends, what it printed, and when.

    `speed` is global samples/s; `seconds` is seconds per iteration; `samples` is the cumulative sample count
    where the log prints one (else the timestamp rule uses step x global batch); `metrics` are extra figures
    (TFLOP/s, MFU, memory) averaged over the kept window.
    """

    step: int | None
    speed: float | None = None
    seconds: float | None = None
    timestamp: float | None = None
    samples: float | None = None
    metrics: tuple[tuple[str, float], ...] = ()


Reader = Callable[[Iterable[str], RunShape], Iterator[Point]]


@dataclass(frozen=True)
class PeerFormat:
    """A framework's log format: how to recognise it, read it, and the published way to measure it."""

    name: str
    description: str
    signature: re.Pattern[str]  # a line that matches it identifies the format (used by --format auto)
    read: Reader
    rules: tuple[str, ...]  # supported rules, the default first
    warmup: int  # lines skipped at the start by default
    window: int | None  # lines kept after the warm-up by default; None: to the end of the log
    printed_from: Literal["speed", "seconds"] = "speed"
    practice: str = ""  # where the defaults come from
    unit: str = "samples/s"

    def recognises(self, line: str) -> bool:
        return self.signature.search(line) is not None


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def to_float(text: str) -> float:
    """A printed number, thousands separators allowed (torchtitan prints `tps: 6,213`)."""
    return float(text.replace(",", ""))


ISO_TIME = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?"


ISO_PARTS = re.compile(r"^(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?$")


@functools.lru_cache(maxsize=64)
def _midnight(date: str) -> float:
    try:
        return dt.datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError as error:
        raise DataError(f"bad date {date!r} in a time stamp: {error}") from None


def iso_time(text: str) -> float:
    """`2020-09-15 14:29:14.427490` or `2020-09-15 14:29:14,427` (logging's asctime) -> seconds.

    Logs carry no time zone; only differences are used, so every stamp is read as UTC. Dates are cached:
    a log holds few distinct days but millions of stamps.
    """
    m = ISO_PARTS.match(text.strip())
    if not m:
        raise DataError(f"bad time stamp {text!r}")
    hours, minutes, seconds = int(m[2]), int(m[3]), int(m[4])
    if hours > 23 or minutes > 59 or seconds > 60:
        raise DataError(f"bad time of day in time stamp {text!r}")
    fraction = float(f"0.{m[5]}") if m[5] else 0.0
    return _midnight(m[1]) + hours * 3600 + minutes * 60 + seconds + fraction


def glog_time(year: int, mmdd: str, clock: str) -> float:
    """glog's `I0826 15:13:29.256277` prefix has no year: the caller supplies one."""
    return iso_time(f"{year:04d}-{mmdd[:2]}-{mmdd[2:]} {clock}")


class StepCounter:
    """Turns per-epoch iteration numbers into one running step count (they restart at every epoch)."""

    def __init__(self) -> None:
        self._offset = 0
        self._last = 0

    def __call__(self, iteration: int) -> int:
        if iteration < self._last:
            self._offset += self._last
        self._last = iteration
        return self._offset + iteration


def merge_ranks(items: Iterable[tuple[Hashable, Point]], lag: int = 64) -> Iterator[tuple[Hashable, list[Point]]]:
    """Group the lines every rank prints for the same iteration, in first-seen order.

    Ranks of a synchronous job print the same iteration close together, so only the last `lag` iterations are
    held: memory stays bounded however long the log is.
    """
    pending: dict[Hashable, list[Point]] = {}
    for key, point in items:
        pending.setdefault(key, []).append(point)
        if len(pending) > lag:
            oldest = next(iter(pending))
            yield oldest, pending.pop(oldest)
    yield from pending.items()


def median_point(step: int, points: list[Point]) -> Point:
    """One point for one iteration printed by several ranks: the median figures, the latest time stamp."""

    def med(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return statistics.median(present) if present else None

    stamps = [p.timestamp for p in points if p.timestamp is not None]
    return Point(
        step=step,
        speed=med([p.speed for p in points]),
        seconds=med([p.seconds for p in points]),
        timestamp=max(stamps) if stamps else None,
    )
