"""NVIDIA DeepLearningExamples DLLogger stdout lines, PyTorch and TensorFlow:

DLL 2020-09-15 14:29:14.427490 - Epoch: 0 Iteration: 2  train.loss : 6.93504  train.total_ips : 4294.91 img/s
DLL 2022-04-05 05:10:36.324733 - Training Epoch: 0 Training Iteration: 651  step_loss : 0.87 ...
DLL 2021-03-23 11:48:38.824370 - (0, 120) total_ips : 2879.142978189404
DLL 2020-12-08 10:21:53.954734 - Iteration: 41  throughput_train : 142.395 seq/s mlm_loss : 10.3715

Rule (DLPerf's scripts for NVIDIA DeepLearningExamples): skip the first 20 iterations, time the next 100:
samples between the time stamps of the iteration lines that bound the window / the time between them. For
PyTorch ResNet-50 `extract_pytorch_logs_time.py` first drops iterations <= 5 and then takes the 20th and 120th
line, i.e. iterations 25 and 125 (the figures of DLPerf's README tables). The printed ips (`train.total_ips`,
`total_ips`, `throughput_train`) are global (all devices); the `printed` rule averages them over the same window.
A tqdm bar printed on the same line is stripped before reading.

BERT's scripts end with a step-less line holding the run's own throughput: PyTorch `training_sequences_per_second`
(run_pretraining.py: global batch x the steps after the first few / their time; run_squad.py: the sequences trained
/ the training time), TensorFlow `throughput_train` ("Throughput Average (sentences/sec)": the steps outside warm-up
and checkpointing x global batch / their time). It is the figure only where the rule's window gives none (a run
whose only line is inside the warm-up), and the record says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import (
    ISO_TIME,
    NUMBER,
    InOrder,
    LogFormat,
    Point,
    Reader,
    RunShape,
    StepCounter,
    iso_time,
    to_float,
)

LINE = re.compile(rf"^DLL (?P<time>{ISO_TIME}) - (?P<data>.*)$")
# `Epoch: 0 Iteration: 2`, `Training Epoch: 0 Training Iteration: 651`, `(0, 120)`, `Iteration: 41`
STEP = re.compile(r"(?:\bEpoch: (?P<epoch>\d+)\s+(?:\w+ )?)?\bIteration: (?P<it>\d+)|^\((?P<e2>\d+), (?P<i2>\d+)\)")
# a key starts after a space: else a long run of non-spaces is tried from each of its characters
VALUE = re.compile(rf"(?<!\S)(\S+) : ({NUMBER})")
WINDOW_RULE = "DLPerf: skip 20 iterations, time the next 100 (time stamps of the lines bounding the window)"


def reader(speed_keys: tuple[str, ...], whole_run_key: str | None = None) -> Reader:
    """A reader for DLLogger lines whose throughput is under one of `speed_keys` (none: time stamps only), and the
    run's own global figure under `whole_run_key` on a step-less summary line."""

    def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        for line in lines:
            m = LINE.match(line)
            if not m:
                continue
            s = STEP.search(m["data"])
            if not s:  # summaries and parameters, not a training step
                if whole_run_key and (summary := _whole_run(m["data"], whole_run_key)) is not None:
                    yield summary
                continue
            epoch, iteration = (s["epoch"], s["it"]) if s["it"] is not None else (s["e2"], s["i2"])
            values = dict(VALUE.findall(m["data"]))
            speed = next((to_float(values[k]) for k in speed_keys if k in values), None)
            if speed_keys and speed is None:
                continue
            step = steps(int(epoch) if epoch is not None else None, int(iteration))
            yield Point(step=step, speed=speed, timestamp=iso_time(m["time"]))

    return read


def _whole_run(data: str, key: str) -> Point | None:
    values = dict(VALUE.findall(data))
    if key not in values:
        return None
    note = f"DLLogger's final {key}: the run's own throughput over its training, as its script computes it"
    return Point(step=None, speed=to_float(values[key]), whole_run=True, note=note)


FORMATS = (
    LogFormat(
        name="dllogger-pytorch-bert",
        description="DeepLearningExamples PyTorch BERT DLLogger `Training Iteration` lines (time stamps only)",
        signature=re.compile(r"^DLL \S+ \S+ - .*Training Iteration: \d+"),
        clue=("DLL ",),
        read=reader((), "training_sequences_per_second"),
        rules=("timestamp",),
        warmup=20,
        window=100,
        unit="sequences/s",
        practice=WINDOW_RULE + "; no throughput is printed per iteration, so time stamps only; where no window is "
        "there, the final training_sequences_per_second",
    ),
    LogFormat(
        name="dllogger-pytorch",
        description="DeepLearningExamples PyTorch DLLogger lines with `train.total_ips` (global img/s)",
        signature=InOrder((r"^DLL \S+ \S+ - ", r"Iteration: \d+ ", r"train\.total_ips : ")),
        clue=("DLL ",),
        read=reader(("train.total_ips",)),
        rules=("timestamp", "printed"),
        warmup=25,
        window=100,
        unit="images/s",
        practice="DLPerf extract_pytorch_logs_time.py: iterations <= 5 skipped, then the time stamps of the 20th and "
        "120th iteration line (iterations 25 and 125): 100 iterations x global batch / the time between them",
    ),
    LogFormat(
        name="dllogger-tf",
        description="DeepLearningExamples TensorFlow DLLogger lines with `total_ips`, `imgs_per_sec` or "
        "`throughput_train` (global)",
        signature=InOrder(
            (
                r"^DLL \S+ \S+ - (?:.*?Iteration: \d+|\(\d+, \d+\)) ",
                r"(?<![\w.])(?:total_ips|imgs_per_sec|throughput_train) : ",
            )
        ),
        clue=("DLL ",),
        read=reader(("total_ips", "imgs_per_sec", "throughput_train"), "throughput_train"),
        rules=("printed", "timestamp"),
        warmup=20,
        window=100,
        practice=WINDOW_RULE + "; mean of the printed global ips over the window",
    ),
)
