"""torchtitan metric lines (colour escapes stripped); `tps` is tokens per second per device:

[rank0]:[titan] 2025-01-10 12:00:00,123 - root - INFO - step: 10  loss:  9.1234  memory: 30.12GiB(38.07%)
tps: 6,213  tflops: 359.84  mfu: 36.38%
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, to_float

ESCAPES = re.compile(r"\x1b\[[0-9;]*m")
LINE = re.compile(r"\bstep:\s*(?P<step>\d+)\s+loss:.*?\btps:\s*(?P<tps>[\d,]+(?:\.\d+)?)")
EXTRA = {
    "tflops_per_device": re.compile(rf"\btflops:\s*({NUMBER})"),
    "mfu_percent": re.compile(rf"\bmfu:\s*({NUMBER})%"),
    "memory_gib": re.compile(rf"\bmemory:\s*({NUMBER})GiB"),
}


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for raw in lines:
        if "tps:" not in raw:
            continue
        line = ESCAPES.sub("", raw)
        m = LINE.search(line)
        if not m:
            continue
        metrics = tuple((name, to_float(x[1])) for name, pattern in EXTRA.items() if (x := pattern.search(line)))
        yield Point(step=int(m["step"]), speed=to_float(m["tps"]) * shape.world_size, metrics=metrics)


FORMATS = (
    PeerFormat(
        name="torchtitan",
        description="torchtitan `step: i loss: ... tps: N tflops: F mfu: M%` lines (throughput in tokens/s)",
        signature=re.compile(r"step:\s*\d+\b.*loss:.*tps:\s*[\d,]"),
        read=read,
        rules=("printed",),
        warmup=1,
        window=None,
        unit="tokens/s",
        practice="step 1 holds start-up and compiling; global tokens/s = tps x devices",
    ),
)
