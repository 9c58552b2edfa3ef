"""HugeCTR training lines; the figure is a latency over the print interval:

[HUGECTR][02:51:59][INFO][RANK0]: Iter: 100 Time(100 iters): 0.315066s Loss: 0.125152 lr:0.001000
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, to_float

LINE = re.compile(rf"Iter: (?P<iter>\d+) Time\((?P<n>\d+) iters\): (?P<time>{NUMBER})s")


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for line in lines:
        m = LINE.search(line)
        if m and int(m["n"]) > 0:
            yield Point(step=int(m["iter"]), seconds=to_float(m["time"]) / int(m["n"]))


FORMATS = (
    PeerFormat(
        name="hugectr",
        description="HugeCTR `Iter: i Time(n iters): t s` lines (latency; throughput = global batch / latency)",
        signature=re.compile(r"Iter: \d+ Time\(\d+ iters\): \S+s"),
        read=read,
        rules=("printed",),
        warmup=1,
        window=None,
        printed_from="seconds",
        practice="the first interval holds start-up; the rest are kept (time stamps are whole seconds only)",
    ),
)
