"""OneFlow benchmark lines: ResNet-50 and BERT (a Unix time stamp may follow the speed) and the GPT table.

train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.98
step: 119, total_loss: 8.010, mlm_loss: 7.331, nsp_loss: 0.679, throughput: 139.896 1598056537.0029895
| 20 | 640 | 10240 | 39.02016 | 13.12142 | 10.43741 |   (batches, micro_batches, samples, samples/s, s, loss)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, Reader, RunShape, StepCounter, to_float

RESNET = re.compile(rf"^train: epoch \d+, iter (?P<step>\d+), .*samples/s: (?P<speed>{NUMBER})(?: (?P<time>\d+\.\d+))?")
BERT = re.compile(rf"^step: (?P<step>\d+), .*throughput: (?P<speed>{NUMBER})(?: (?P<time>\d+\.\d+))?")
GPT = re.compile(
    rf"^\|\s*(?P<step>\d+)\s*\|\s*\d+\s*\|\s*(?P<samples>\d+)\s*\|\s*(?P<speed>{NUMBER})\s*\|"
    rf"\s*(?P<latency>{NUMBER})\s*\|\s*(?:{NUMBER}|nan)\s*\|\s*$"
)


def stamped_reader(line_re: re.Pattern[str]) -> Reader:
    """Lines of `step`, `speed` and an optional trailing Unix time stamp."""

    def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        for line in lines:
            m = line_re.match(line)
            if m:
                stamp = float(m["time"]) if m["time"] else None
                yield Point(step=steps(int(m["step"])), speed=to_float(m["speed"]), timestamp=stamp)

    return read


def read_gpt(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for line in lines:
        m = GPT.match(line)
        if m:
            yield Point(
                step=int(m["step"]),
                speed=to_float(m["speed"]),
                seconds=to_float(m["latency"]),
                samples=float(m["samples"]),
            )


FORMATS = (
    PeerFormat(
        name="oneflow-resnet",
        description="OneFlow ResNet-50 `train: epoch e, iter i, ... samples/s: N [unix time]` lines",
        signature=re.compile(r"^train: epoch \d+, iter \d+, .*samples/s: "),
        read=stamped_reader(RESNET),
        rules=("printed", "timestamp"),
        warmup=1,
        window=5,
        practice="published (printed every 20 iterations): iterations 20 to 120, i.e. after line 1 up to line 6",
    ),
    PeerFormat(
        name="oneflow-bert",
        description="OneFlow BERT `step: i, ... throughput: N [unix time]` lines",
        signature=re.compile(r"^step: \d+, .*throughput: "),
        read=stamped_reader(BERT),
        rules=("printed", "timestamp"),
        warmup=20,
        window=100,
        practice="published: iterations 20 to 120",
    ),
    PeerFormat(
        name="oneflow-gpt",
        description="OneFlow GPT table rows `| batches | micro_batches | samples | throughput | latency | loss |`",
        signature=GPT,
        read=read_gpt,
        rules=("printed",),
        warmup=1,
        window=None,
        practice="the first print interval holds start-up; the rest are kept",
    ),
)
