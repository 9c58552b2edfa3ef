"""MXNet `Speedometer` lines; every rank prints the global speed, so one iteration is the median over ranks:

2020-08-14 10:00:00,123 Epoch[0] Batch [20]	Speed: 385.21 samples/sec	accuracy=0.000000

Rule (DLPerf's MXNet scripts): per-iteration median across ranks, skip the first 20 iterations, average over
the next 100. A line covers the batches since the previous line; one display may print several metric lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import (
    ISO_TIME,
    NUMBER,
    LogFormat,
    Point,
    RunShape,
    StepCounter,
    stamp_in,
    to_float,
)

LINE = re.compile(
    rf"Epoch\[(?P<epoch>\d+)\] Batch ?\[(?:\d+-)?(?P<batch>\d+)\]\s+Speed: (?P<speed>{NUMBER}) samples/sec"
)
STAMP = re.compile(rf"^\s*({ISO_TIME})")


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    steps = StepCounter()
    for line in lines:
        m = LINE.search(line) if "Speed:" in line else None
        if m:
            yield Point(
                step=steps(int(m["epoch"]), int(m["batch"])),
                speed=to_float(m["speed"]),
                timestamp=stamp_in(STAMP, line),
            )


FORMATS = (
    LogFormat(
        name="mxnet",
        description="MXNet `Epoch[e] Batch [i] Speed: N samples/sec`, every rank printing (median across ranks)",
        signature=re.compile(r"Epoch\[\d+\] Batch ?\[[\d-]+\]\s+Speed: \S+ samples/sec"),
        clue=("Speed: ",),
        read=read,
        rules=("printed", "timestamp"),
        warmup=20,
        window=100,
        practice="DLPerf: per-iteration medians across ranks; skip 20 iterations, mean of the next 100",
    ),
)
