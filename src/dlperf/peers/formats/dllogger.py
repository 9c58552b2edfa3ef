"""NVIDIA DeepLearningExamples DLLogger stdout lines, TensorFlow and PyTorch:

DLL 2020-12-08 10:21:53.954734 - Iteration: 41  throughput_train : 142.395 seq/s mlm_loss : 10.3715
DLL 2020-09-15 14:29:14.427490 - Epoch: 0 Iteration: 2  train.loss : 6.93504  train.total_ips : 4294.91 img/s
DLL 2020-09-16 10:15:04.123456 - Training Epoch: 0 Training Iteration: 21  average_loss : 10.875 ...
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import ISO_TIME, NUMBER, PeerFormat, Point, Reader, RunShape, StepCounter, iso_time, to_float

LINE = re.compile(rf"^DLL (?P<time>{ISO_TIME}) - (?P<data>.*)$")
ITERATION = re.compile(r"\bIteration: (\d+)")
VALUE = re.compile(rf"(\S+) : ({NUMBER})")


def reader(speed_keys: tuple[str, ...]) -> Reader:
    """A reader for DLLogger lines whose throughput is under one of `speed_keys` (none: time stamps only)."""

    def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        for line in lines:
            m = LINE.match(line)
            if not m:
                continue
            iteration = ITERATION.search(m["data"])
            if not iteration:  # summaries and parameters, not a training step
                continue
            values = dict(VALUE.findall(m["data"]))
            speed = next((to_float(values[k]) for k in speed_keys if k in values), None)
            if speed_keys and speed is None:
                continue
            yield Point(step=steps(int(iteration[1])), speed=speed, timestamp=iso_time(m["time"]))

    return read


FORMATS = (
    PeerFormat(
        name="dllogger-pytorch-bert",
        description="DeepLearningExamples PyTorch BERT DLLogger `Training Iteration` lines (time stamps only)",
        signature=re.compile(r"^DLL \S+ \S+ - .*Training Iteration: \d+"),
        read=reader(()),
        rules=("timestamp",),
        warmup=20,
        window=100,
        practice="published: time between the 20th and the 120th iteration line",
    ),
    PeerFormat(
        name="dllogger-pytorch",
        description="DeepLearningExamples PyTorch DLLogger lines with `train.total_ips` (global img/s)",
        signature=re.compile(r"^DLL \S+ \S+ - .*Iteration: \d+ .*train\.total_ips : "),
        read=reader(("train.total_ips",)),
        rules=("printed", "timestamp"),
        warmup=20,
        window=100,
        practice="published: iteration lines 20 to 120",
    ),
    PeerFormat(
        name="dllogger-tf",
        description="DeepLearningExamples TensorFlow DLLogger lines with `imgs_per_sec` or `throughput_train`",
        signature=re.compile(r"^DLL \S+ \S+ - .*Iteration: \d+ .*(?:imgs_per_sec|throughput_train) : "),
        read=reader(("imgs_per_sec", "throughput_train")),
        rules=("printed", "timestamp"),
        warmup=2,
        window=10,
        practice="published for BERT (printed every 10 iterations): iterations 20 to 120, i.e. lines 3-12; "
        "ResNet-50 logs start after their own warm-up: use --warmup 0 --window 100",
    ),
)
