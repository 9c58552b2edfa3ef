"""PyTorch examples ImageNet `ProgressMeter` lines, every rank printing into one file:

Epoch: [0][ 4/13]  Time  0.359 ( 3.064)  Data  0.108 ( 0.059)  Loss 1.1616e+01 ...
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, median_point, merge_ranks, to_float

LINE = re.compile(rf"Epoch: \[(?P<epoch>\d+)\]\[\s*(?P<batch>\d+)/\s*(?P<total>\d+)\]\s+Time\s+(?P<time>{NUMBER})")


def _rank_lines(lines: Iterable[str]) -> Iterator[tuple[int, Point]]:
    for line in lines:
        m = LINE.search(line)
        if m:
            step = int(m["epoch"]) * int(m["total"]) + int(m["batch"])
            yield step, Point(step=step, seconds=to_float(m["time"]))


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for step, points in merge_ranks(_rank_lines(lines)):
        yield median_point(step, points)


FORMATS = (
    PeerFormat(
        name="pytorch-imagenet",
        description="PyTorch examples ImageNet `Epoch: [e][i/n] Time t (avg)` lines (median across ranks)",
        signature=re.compile(r"Epoch: \[\d+\]\[\s*\d+/\s*\d+\]\s+Time\s+\S+ \("),
        read=read,
        rules=("printed",),
        warmup=20,
        window=100,
        printed_from="seconds",
        practice="published: global batch / mean batch time over iterations 20 to 120",
    ),
)
