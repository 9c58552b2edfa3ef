"""The FSDP test case of aws-samples/awsome-distributed-training (3.test_cases/pytorch/FSDP/src/train.py), rank 0:

2025-06-17 16:24:55 I [train.py:103] Batch 1 Loss: 11.64398, Speed: 10.90 samples/sec, lr: 0.000100

What the figure is (train.py `train`, 7217859f): `Speed` = `input_data.shape[0] * world_size / step_time`,
`step_time` from before the step's forward to after its loss's `.item()` (the data loader's next batch is fetched
before it): GLOBAL samples/s of that one step, needing no batch from the file's path; printed every
`logging_freq` batches, `Batch` counting within the epoch. The time stamp is whole seconds.

Rule (the seeds' method; the test case publishes none): the first 5 batches skipped, each kept line's steps at its
rate (the window's samples over its time). Second reading: the time stamps x batches x the global batch given,
where their whole seconds leave it known to 2 % (rules.PRECISION).
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import ISO_TIME, NUMBER, LogFormat, Point, RunShape, each_line, iso_time, loss, to_float

LINE = re.compile(
    rf"^(?P<time>{ISO_TIME}) I \[train\.py:\d+\] Batch (?P<batch>\d+) Loss: (?P<loss>{NUMBER}|nan), "
    rf"Speed: (?P<speed>{NUMBER}) samples/sec"
)


def _point(m: re.Match[str], shape: RunShape) -> Point:
    return Point(step=int(m["batch"]), speed=to_float(m["speed"]), timestamp=iso_time(m["time"]), resolution=0.5,
                 metrics=loss(m["loss"]))  # fmt: skip


FORMATS = (
    LogFormat(
        name="aws-fsdp",
        description="awsome-distributed-training's FSDP train.py `Batch N Loss: L, Speed: S samples/sec, lr: R` lines",
        signature=re.compile(rf"^{ISO_TIME} I \[train\.py:\d+\] Batch \d+ Loss: \S+, Speed: [\d.]+ samples/sec"),
        clue=(" samples/sec",),
        read=each_line(LINE.match, _point, "Speed: "),
        rules=("printed", "timestamp"),
        warmup=5,
        rates_over_time=True,
        practice="awsome-distributed-training FSDP train.py: global samples / each step's time, the first 5 "
        "batches dropped",
    ),
)
