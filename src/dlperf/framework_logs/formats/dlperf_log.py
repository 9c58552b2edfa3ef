"""dlperf's own run logs (see dlperf.records.runlog); the harness has already left its warm-up out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, Point, RunShape
from dlperf.records.runlog import WINDOW_RE, parse_window


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for line in lines:
        if not line.startswith("[dlperf] iter "):
            continue
        try:
            window = parse_window(line)
        except ValueError:  # the line's shape matched but a figure is not a number
            raise DataError(f"unreadable dlperf window line {line[:80]!r}") from None
        if window is not None:
            yield Point(
                step=window.iteration,
                speed=window.samples_per_s,
                seconds=window.ms_per_iter / 1000,
                timestamp=window.timestamp,
            )


FORMATS = (
    LogFormat(
        name="dlperf",
        description="dlperf's own `[dlperf] iter i/n ... samples/s N ms/iter M time T` lines",
        signature=WINDOW_RE,
        clue=("[dlperf] iter ",),
        record_start=re.compile(r"\[dlperf\] "),
        read=read,
        rules=("printed", "timestamp"),
        warmup=0,
        settles=False,
        practice="warm-up iterations are never logged, so every window is kept",
    ),
)
