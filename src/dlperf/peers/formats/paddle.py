"""PaddlePaddle image-classification lines; `elapse` is the time of that one batch:

[Pass 0, train batch 20] 	loss 6.91, acc1 0.0, acc5 0.0, elapse 0.3412 sec
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, StepCounter, to_float

LINE = re.compile(rf"\[Pass (?P<epoch>\d+), train batch (?P<batch>\d+)\].*\belapse (?P<elapse>{NUMBER}) sec")


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    steps = StepCounter()
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        elapse = to_float(m["elapse"])
        speed = shape.global_batch / elapse if elapse > 0 else None
        yield Point(step=steps(int(m["batch"])), speed=speed, seconds=elapse)


FORMATS = (
    PeerFormat(
        name="paddle",
        description="PaddlePaddle `[Pass p, train batch i] ... elapse t sec` lines (speed = global batch / t)",
        signature=re.compile(r"\[Pass \d+, train batch \d+\].*\belapse \S+ sec"),
        read=read,
        rules=("printed",),
        warmup=21,
        window=100,
        practice="published: batch 0 and the next 20 lines skipped, mean of global batch / elapse over 100 lines",
    ),
)
