"""HugeCTR training lines; the figure is the time of the print interval, which the line names:

[HUGECTR][02:51:59][INFO][RANK0]: Iter: 100 Time(100 iters): 0.315066s Loss: 0.125152 lr:0.001000
[HCTR][04:50:22.860][INFO][RK0][main]: Iter: 100 Time(100 iters): 0.62365s Loss: 0.13 lr:24.0

Rule: HugeCTR prints no throughput; global records/s = the records of the intervals after the first (global batch
x iterations) over their summed time. HugeCTR's own benchmark scripts drop the start-up interval; its final
`Average speed` line in MLPerf runs is computed the same way over the whole run. Time stamps are whole seconds in
older versions, so only the printed rule.
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, each_line, to_float

LINE = re.compile(rf"Iter: (?P<iter>\d+) Time\((?P<n>\d+) iters\): (?P<time>{NUMBER})s")


def _point(m: re.Match[str], shape: RunShape) -> Point | None:
    step, iterations = int(m["iter"]), int(m["n"])
    return Point(step=step, seconds=to_float(m["time"]) / iterations, start=step - iterations) if iterations else None


FORMATS = (
    LogFormat(
        name="hugectr",
        description="HugeCTR `Iter: i Time(n iters): t s` lines (latency; throughput = global batch / latency)",
        signature=re.compile(r"Iter: \d+ Time\(\d+ iters\): \S+s"),
        clue=(" iters): ",),
        read=each_line(LINE.search, _point),
        warmup=1,
        printed_from="seconds",
        unit="records/s",
        practice="the first print interval (from iteration 0) holds start-up; every later interval is kept",
    ),
)
