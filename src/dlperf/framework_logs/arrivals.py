"""The arrival-time second reading of a `--command` log: dlperf stamps each line as it reaches the log
(`<run>.arrivals`: the log's end offset and a monotonic time per line written, launch/external_node.py), so any
reader's points carry a time even where the script prints none: samples between the points (their steps x the
global batch) over the arrival times between them, in the same window (its start as the reader placed it).

It can only check: a program that buffers its output delivers lines in bursts, and lines printed less than 20 ms
apart time their own printing as much as the training, so such readings are dropped, not used; a figure that
disagrees with it is checked by the same rules as any second reading (framework_logs/crosscheck.py: refused where
off by a factor of the run's shape or over 2x).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, Point, RunShape
from dlperf.framework_logs.measure import Measured, measure
from dlperf.framework_logs.prefilter import Prefilter
from dlperf.framework_logs.textlines import LogLines, holding, strip_prefixes

BURST_S = 1e-3  # lines closer than this arrived in one write of a buffered program
BURSTY = 0.5  # a reading whose kept points mostly arrived in bursts is no reading
# Printing a line and carrying it to the log costs about a millisecond, more on a loaded machine: lines that come
# less than this far apart on average time the printing as much as the training, and give no reading.
MIN_GAP_S = 0.02


def stamped_lines(log: Path, arrivals: Path, prefilter: Prefilter | None = None) -> Iterator[tuple[float, str]]:
    """(arrival time, line) for the log's lines (those `prefilter` finds), `\\r` redraws as lines of their own: a
    line's time is the first stamp at or after its end."""
    with open(arrivals, encoding="ascii") as stamps, closing(LogLines(log, prefilter)) as lines:
        rows = (row.split() for row in stamps)
        end, when = -1, 0.0
        for line in lines:
            while lines.offset > end:
                row = next(rows, None)
                if row is None:
                    return
                end, when = int(row[0]), float(row[1])
            yield when, line


def _last_stamp(arrivals: Path, default: float) -> float:
    """The time of the arrivals' last stamp: the log's last line's, passed over or not (`default`: no stamp)."""
    with open(arrivals, encoding="ascii") as stamps:
        last = collections.deque(stamps, maxlen=1)
    return float(last[0].split()[1]) if last else default


def arrival_reading(log: Path, fmt: LogFormat, warmup: int, window: int | None, shape: RunShape) -> float | None:
    """The format's window by arrival times (None where the arrivals file is missing, the format's steps are not
    iterations, or the lines came in bursts)."""
    arrivals = log.with_suffix(".arrivals")
    if not arrivals.is_file() or not fmt.steps_are_iterations or fmt.last_only:
        return None
    clock = [0.0]
    gaps = [0, 0, 0.0]  # steps that advanced, those of them that arrived in a burst, and their time

    def lines() -> Iterator[str]:
        for when, line in stamped_lines(log, arrivals, holding((*fmt.clue, *fmt.reads)) if fmt.clue else None):
            clock[0] = when
            yield from (strip_prefixes(record) for record in fmt.records_in(strip_prefixes(line)))
        clock[0] = _last_stamp(arrivals, clock[0])  # where the reader gives its last point once the lines end

    def stamped() -> Iterator[Point]:
        """Each point at its line's arrival, with the samples so far: its iterations x the samples the line says
        an iteration holds (speed x time: nanoGPT's tokens, timm's update), else the global batch."""
        samples, previous = 0.0, None
        for point in fmt.read(lines(), shape):
            if point.step is None:
                continue
            if previous is not None and point.step > previous.step:
                gaps[0] += 1
                gaps[1] += clock[0] - previous.timestamp < BURST_S
                gaps[2] += clock[0] - previous.timestamp
                each = point.speed * point.seconds if point.speed and point.seconds else shape.global_batch
                samples += (point.step - previous.step) * each
            point = dataclasses.replace(point, timestamp=clock[0], samples=samples, resolution=None, check=None)
            previous = point
            yield point

    timed = dataclasses.replace(fmt, rules=("timestamp",), steps_are_iterations=True)
    try:
        measured: Measured = measure(stamped(), timed, "timestamp", warmup, window, shape, settles=False)
    except DataError:
        return None
    if not gaps[0] or gaps[1] > BURSTY * gaps[0] or gaps[2] / gaps[0] < MIN_GAP_S or measured.kept < 2:
        return None
    return measured.throughput
