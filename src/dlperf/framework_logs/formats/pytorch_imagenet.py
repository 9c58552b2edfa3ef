"""PyTorch examples ImageNet `ProgressMeter` lines, every rank printing into one file:

Epoch: [0][ 4/13]  Time  0.359 ( 3.064)  Data  0.108 ( 0.059)  Loss 1.1616e+01 ...

`Time` is the time of that one batch (its running mean in brackets). Rule (DLPerf's PyTorch scripts): skip
the first 20 iterations, global images/s = global batch / the mean batch time over the next 100; every rank
prints the same iteration, so the median over ranks is taken first.
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, each_line, to_float

LINE = re.compile(rf"Epoch: \[(?P<epoch>\d+)\]\[\s*(?P<batch>\d+)/\s*(?P<total>\d+)\]\s+Time\s+(?P<time>{NUMBER})")


def _point(m: re.Match[str], shape: RunShape) -> Point:
    step = int(m["epoch"]) * int(m["total"]) + int(m["batch"])
    return Point(step=step, seconds=to_float(m["time"]), start=step - 1, run=int(m["total"]))


FORMATS = (
    LogFormat(
        name="pytorch-imagenet",
        description="PyTorch examples ImageNet `Epoch: [e][i/n] Time t (avg)` lines (median across ranks)",
        signature=re.compile(r"Epoch: \[\d+\]\[\s*\d+/\s*\d+\]\s+Time\s+\S+ \("),
        record_start=re.compile(r"Epoch: \[\d+\]\["),
        clue=("Epoch: [",),
        read=each_line(LINE.search, _point),
        warmup=20,
        window=100,
        printed_from="seconds",
        unit="images/s",
        practice="DLPerf: skip 20 iterations, global batch / mean batch time over the next 100",
    ),
)
