"""OneFlow benchmark lines: ResNet-50 and BERT (a Unix time stamp may follow the speed) and the GPT table.

train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.98
step: 119, total_loss: 8.010, mlm_loss: 7.331, nsp_loss: 0.679, throughput: 139.896 1598056537.0029895
| 20 | 640 | 10240 | 39.02016 | 13.12142 | 10.43741 |   (batches, micro_batches, samples, samples/s, s, loss)
[0] [train], epoch: 0/50, iter: 100/3336, loss: 1.73064, lr: 0.004604, top1: 0.00208, throughput: 159.71

Rule (OneFlow-Benchmark reports, resnet50_v15_fp32_report.md and bert_fp32_report.md): "the first samples/s
value is discarded, we average the other", i.e. the first print interval is the warm-up. The benchmark's
`samples/s` and `throughput` are global; the Oneflow-Inc/models line starts with the printing rank (`[r]`) and
its throughput is that rank's own (per device): the median across ranks x devices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import (
    NUMBER,
    LogFormat,
    Point,
    Reader,
    RunShape,
    StepCounter,
    each_line,
    per_device,
    to_float,
)

RESNET = re.compile(
    rf"^train: epoch (?P<epoch>\d+), iter (?P<step>\d+), .*samples/s: (?P<speed>{NUMBER})(?: (?P<time>\d+\.\d+))?"
)
BERT = re.compile(rf"^step: (?P<step>\d+), .*throughput: (?P<speed>{NUMBER})(?: (?P<time>\d+\.\d+))?")
MODELS = re.compile(
    rf"^\[(?P<rank>\d+)\] \[train\], epoch: (?P<epoch>\d+)/(?P<epochs>\d+), iter: (?P<step>\d+)/(?P<per>\d+), "
    rf".*throughput: (?P<speed>{NUMBER})"
)
GPT = re.compile(
    rf"^\|\s*(?P<step>\d+)\s*\|\s*\d+\s*\|\s*(?P<samples>\d+)\s*\|\s*(?P<speed>{NUMBER})\s*\|"
    rf"\s*(?P<latency>{NUMBER})\s*\|\s*(?:{NUMBER}|nan)\s*\|\s*$"
)

REPORT_RULE = "OneFlow-Benchmark reports: the first printed value is discarded, the others averaged"


def stamped_reader(line_re: re.Pattern[str]) -> Reader:
    """Lines of `step`, `speed` and an optional trailing Unix time stamp."""

    def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        for line in lines:
            m = line_re.match(line)
            if m:
                stamp = float(m["time"]) if m["time"] else None
                epoch = int(m["epoch"]) if "epoch" in m.re.groupindex else None
                yield Point(step=steps(epoch, int(m["step"])), speed=to_float(m["speed"]), timestamp=stamp)

    return read


def _models_point(m: re.Match[str], shape: RunShape) -> Point:
    step = int(m["epoch"]) * int(m["per"]) + int(m["step"])
    return Point(step=step, speed=per_device(to_float(m["speed"]), shape), run=int(m["epochs"]))


def _gpt_point(m: re.Match[str], shape: RunShape) -> Point:
    return Point(step=int(m["step"]), speed=to_float(m["speed"]), seconds=to_float(m["latency"]),
                 samples=float(m["samples"]))  # fmt: skip


FORMATS = (
    LogFormat(
        name="oneflow-resnet",
        description="OneFlow ResNet-50 `train: epoch e, iter i, ... samples/s: N [unix time]` lines",
        signature=re.compile(r"^train: epoch \d+, iter \d+, .*samples/s: "),
        clue=("train: epoch ",),
        read=stamped_reader(RESNET),
        rules=("printed", "timestamp"),
        warmup=1,
        unit="images/s",
        practice=REPORT_RULE,
    ),
    LogFormat(
        name="oneflow-bert",
        description="OneFlow BERT `step: i, ... throughput: N [unix time]` lines",
        signature=re.compile(r"^step: \d+, .*throughput: "),
        clue=("throughput: ",),
        read=stamped_reader(BERT),
        rules=("printed", "timestamp"),
        warmup=1,
        unit="sequences/s",
        practice=REPORT_RULE,
    ),
    LogFormat(
        name="oneflow-gpt",
        description="OneFlow GPT table rows `| batches | micro_batches | samples | throughput | latency | loss |`",
        signature=GPT,
        clue=("|",),
        read=each_line(GPT.match, _gpt_point),
        warmup=1,
        practice="the first print interval holds start-up; the rest are kept",
    ),
    LogFormat(
        name="oneflow-models",
        description="Oneflow-Inc/models `[rank] [train], epoch: e/E, iter: i/n, ... throughput: N` (per rank)",
        signature=MODELS,
        clue=("] [train], epoch: ",),
        read=each_line(MODELS.match, _models_point),
        warmup=1,
        unit="images/s",
        printed="per device",
        practice=REPORT_RULE + " (median across ranks first)",
    ),
)
