"""torchtitan metric lines (colour escapes and `[rankN]:` tags are stripped beforehand):

[titan] 2025-01-10 12:00:00,123 - root - INFO - step: 10  loss:  9.1234  memory: 30.12GiB(38.07%)  tps: 6,213
tflops: 359.84  mfu: 36.38%

`tps` is tokens per second PER DEVICE over the last log interval, `memory` the device's peak reserved memory.
Rule (torchtitan's published autoresearch results, `results.tsv` / `learnings.md`): the figure is the `tps` of
the last printed step (step 10 of a 10-step run), once step 1 (compiling, start-up) is behind; global tokens/s
= tps x devices. When several ranks print, their lines for one step are combined (median).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, per_device, to_float

LINE = re.compile(r"\bstep:\s*(?P<step>\d+)\s+loss:.*?\btps:\s*(?P<tps>[\d,]+(?:\.\d+)?)")
MEMORY = re.compile(rf"\bmemory:\s*({NUMBER})GiB")
EXTRA = {
    "tflops_per_device": re.compile(rf"\btflops:\s*({NUMBER})"),
    "mfu_percent": re.compile(rf"\bmfu:\s*({NUMBER})%"),
}


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for line in lines:
        if "tps:" not in line:
            continue
        m = LINE.search(line)
        if not m:
            continue
        metrics = tuple((name, to_float(x[1])) for name, pattern in EXTRA.items() if (x := pattern.search(line)))
        memory = MEMORY.search(line)
        yield Point(
            step=int(m["step"]),
            speed=per_device(to_float(m["tps"]), shape),
            memory_mib=to_float(memory[1]) * 1024 if memory else None,
            metrics=metrics,
        )


FORMATS = (
    PeerFormat(
        name="torchtitan",
        description="torchtitan `step: i loss: ... memory: M GiB ... tps: N tflops: F mfu: M%` lines",
        signature=re.compile(r"step:\s*\d+\b.*loss:.*tps:\s*[\d,]"),
        read=read,
        rules=("printed",),
        warmup=1,
        window=None,
        last_only=True,
        unit="tokens/s",
        printed="per device",
        practice="torchtitan autoresearch results.tsv/learnings.md: the tps of the last printed step after step 1 "
        "(step 10 of a 10-step run), x devices",
    ),
)
