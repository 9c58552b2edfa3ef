"""PaddlePaddle image-classification lines, old (`elapse`) and current (`batch_cost ... ips`):

[Pass 0, train batch 20] 	loss 6.91, acc1 0.0, acc5 0.0, elapse 0.3412 sec
[Pass 0, train batch 10]   loss 21.68, ..., batch_cost 0.13110 sec, reader_cost 0.00069 sec, ips 976.33 images/sec

Rule (DLPerf's PaddlePaddle scripts): skip the first 20 iterations, average over the next 100; speed = global
batch / the printed time of a batch (`ips` is the one device's batch / batch_cost, a per-device figure).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, StepCounter, to_float

LINE = re.compile(
    rf"\[Pass (?P<epoch>\d+), train batch (?P<batch>\d+)\].*\b(?:elapse|batch_cost) (?P<elapse>{NUMBER}) sec"
)


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    steps = StepCounter()
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        elapse = to_float(m["elapse"])
        speed = shape.global_batch / elapse if elapse > 0 else None
        yield Point(step=steps(int(m["epoch"]), int(m["batch"])), speed=speed, seconds=elapse)


FORMATS = (
    PeerFormat(
        name="paddle",
        description="PaddlePaddle `[Pass p, train batch i] ... elapse t sec` or `batch_cost t sec ... ips N` lines "
        "(global = global batch / t)",
        signature=re.compile(r"\[Pass \d+, train batch \d+\].*\b(?:elapse|batch_cost) \S+ sec"),
        read=read,
        rules=("printed",),
        warmup=20,
        window=100,
        unit="images/s",
        printed="per device",
        practice="DLPerf: skip 20 iterations, mean of global batch / batch time over the next 100",
    ),
)
