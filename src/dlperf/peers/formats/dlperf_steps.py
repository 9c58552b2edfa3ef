"""The side file of dlperf's instrumentation hook (instrument/startup/sitecustomize.py), one line per optimizer
step of one process:

    <step> <monotonic seconds after it> <the step's global samples, or - where the framework does not say>

Read by the timestamp rule with the run's own warm-up and window (`--warmup-iters`, `--iters`, as native runs):
samples between the last warm-up step and the window's last, over the time between them. Steps whose framework
says no samples count the case's global batch. Never detected in a log: a `--command` run names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import PeerFormat, Point, RunShape

LINE = re.compile(r"^(\d+) (\d+\.\d+) (\d+|-)$")
NAME = "dlperf-steps"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    samples = 0
    for line in lines:
        m = LINE.match(line)
        if m is None:
            continue
        samples += int(m[3]) if m[3] != "-" else shape.global_batch
        yield Point(step=int(m[1]), timestamp=float(m[2]), samples=samples)


FORMATS = (
    PeerFormat(
        name=NAME,
        description="dlperf's instrumentation side file: one line per optimizer step (step, time, samples); "
        "read by the run that wrote it, never detected",
        signature=re.compile(r"(?!)"),  # never detected: named by the run that wrote it
        read=read,
        rules=("timestamp",),
        warmup=20,
        window=100,
        unit="samples/s",
        practice="dlperf's own: samples over time between the end of the warm-up and the window's last step",
    ),
)
