"""PaddlePaddle training lines, the fluid era's and today's:

[Pass 0, train batch 20] 	loss 6.91, acc1 0.0, acc5 0.0, elapse 0.3412 sec                       (fluid, DLPerf)
[Pass 0, train batch 10]   loss 21.68, ..., batch_cost 0.13110 sec, reader_cost 0.00069 sec, ips 976.33 images/sec
[Epoch 0, batch 10] loss 44.69, ..., batch_cost: 2.80404 s, reader_cost: 0.00015 s, ips: 0.71326 images/sec (dygraph)
PaddleClas: [Train][Epoch 1/120][Iter: 10/5005]lr: 0.1, ..., batch_cost: 1.77050s, ips: 4.51850 samples/s
PaddleSeg: [TRAIN] epoch: 1, iter: 10/1000, loss: 2.5, ..., batch_cost: 0.2653, ips: 30.15 samples/sec
PaddleOCR: epoch: [1/500], iter: 10, ..., avg_batch_cost: 1.2 s, avg_samples: 12.8, ips: 10.6 samples/s

Rule (DLPerf's PaddlePaddle scripts): skip the first 20 iterations, time the next 100; speed = global batch / the
printed time of a batch, combined as for every format that prints a step time: samples over the summed time (DLPerf's
script averages the per-line rates, which weighs the fast lines more). `batch_cost` is one process's mean time per
iteration over the logging interval and `ips` its samples / batch_cost (PaddleClas' and PaddleSeg's loggers), so
`ips` x world size is the second reading of the same figure; a printed per-process batch (`avg_samples`) is used
instead of the path's where there is one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, InOrder, LogFormat, Point, RunShape, StepCounter, to_float

POSITION = re.compile(
    r"\[Pass (?P<pass>\d+), train batch (?P<pass_batch>\d+)\]"
    r"|\[Epoch (?P<dy_epoch>\d+), batch (?P<dy_batch>\d+)\]"
    r"|\[Epoch (?P<clas_epoch>\d+)/\d+\]\[Iter: (?P<clas_iter>\d+)/(?P<clas_len>\d+)\]"
    r"|\[TRAIN\] epoch: (?P<seg_epoch>\d+), iter: (?P<seg_iter>\d+)/\d+"
    r"|epoch: \[(?P<ocr_epoch>\d+)/\d+\], (?:iter|global_step): (?P<ocr_iter>\d+)"
)
COST = re.compile(rf"\b(?:avg_)?(?:elapse|batch_cost):? (?P<t>{NUMBER}) ?(?:s|sec)?\b")
IPS = re.compile(rf"\bips:? (?P<ips>{NUMBER}) ?(?:samples|images|img)")
SAMPLES = re.compile(rf"\bavg_samples: (?P<n>{NUMBER})")


def _step(m: re.Match[str], steps: StepCounter) -> int:
    if m["pass"] is not None:
        return steps(int(m["pass"]), int(m["pass_batch"]))
    if m["dy_epoch"] is not None:
        return steps(int(m["dy_epoch"]), int(m["dy_batch"]))
    if m["clas_epoch"] is not None:  # PaddleClas counts epochs from 1 and prints the epoch's length
        return (int(m["clas_epoch"]) - 1) * int(m["clas_len"]) + int(m["clas_iter"])
    if m["seg_epoch"] is not None:  # PaddleSeg's iter counts the whole run
        return int(m["seg_iter"])
    return steps(int(m["ocr_epoch"]), int(m["ocr_iter"]))


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    steps = StepCounter()
    for line in lines:
        position = POSITION.search(line)
        cost = COST.search(line) if position else None
        if not position or not cost:
            continue
        samples = SAMPLES.search(line)
        ips = IPS.search(line)
        yield Point(
            step=_step(position, steps),
            seconds=to_float(cost["t"]),
            batch=to_float(samples["n"]) * shape.world_size if samples else None,
            check=to_float(ips["ips"]) * shape.world_size if ips else None,
        )


FORMATS = (
    LogFormat(
        name="paddle",
        description="PaddlePaddle lines with a time per batch (`elapse`, `batch_cost`) and optionally `ips`: fluid "
        "`[Pass p, train batch i]`, dygraph `[Epoch e, batch i]`, PaddleClas `[Train][Epoch e/E][Iter: i/N]`, "
        "PaddleSeg `[TRAIN] epoch: e, iter: i/N`, PaddleOCR `epoch: [e/E], iter: i` (global = global batch / t)",
        signature=InOrder(
            (
                r"\[Pass \d+, train batch \d+\]|\[Epoch \d+, batch \d+\]|\[Epoch \d+/\d+\]\[Iter: \d+/\d+\]"
                r"|\[TRAIN\] epoch: \d+, iter: \d+/\d+|epoch: \[\d+/\d+\], (?:iter|global_step): \d+",
                r"\b(?:avg_)?(?:elapse|batch_cost):? \S",
            )
        ),
        clue=("[Pass ", "[Epoch ", "[TRAIN] epoch: ", "epoch: ["),
        read=read,
        check_reading="the printed ips x world size",
        warmup=20,
        window=100,
        printed_from="seconds",
        unit="images/s",
        printed="per device",
        practice="DLPerf: skip 20 iterations, global batch / batch time over the next 100 (samples over the summed "
        "time); ips x world size is the second reading",
    ),
)
