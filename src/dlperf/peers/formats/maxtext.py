"""MaxText step lines (metric_logger.py; a glog prefix such as `I0601 22:14:54 metric_logger.py:181] ` is allowed):

completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, total_weights: 196608,
loss: 10.374

`Tokens/s/device` is the step's tokens per device over its measured time, `TFLOP/s/device` MaxText's model FLOPs per
device over the same time, `total_weights` the step's tokens that count toward the loss, over all devices. Rule
(MaxText's guide "Understand logs and metrics": "The performance metrics fluctuate at the beginning, and become
stable towards the end. Therefore, we usually read them from the last step"): the last printed step, once steps 0
(compiling) and 1 (dispatched before step 0's time was taken, 0.3 s in the guide's own log) are behind; global
tokens/s = Tokens/s/device x devices. The second reading is total_weights / seconds: global tokens per second
without the device count. MaxText counts only real tokens in total_weights (padding carries no weight), so on a real
data set it is lower than the tokens the figure counts (the guide's C4 run: 1.26x); synthetic data pads nothing.
Lines of old MaxText without `Tokens/s/device` carry no token figure and are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, per_device, to_float

LINE = re.compile(
    rf"\bcompleted step: (?P<step>\d+), seconds: (?P<seconds>{NUMBER}), TFLOP/s/device: (?P<tflops>{NUMBER}), "
    rf"Tokens/s/device: (?P<tokens>{NUMBER})"
)
WEIGHTS = re.compile(rf"\btotal_weights: ({NUMBER})")
LOSS = re.compile(rf"\bloss: ({NUMBER})")


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    for line in lines:
        if "completed step:" not in line or not (m := LINE.search(line)):
            continue
        seconds = to_float(m["seconds"])
        weights = WEIGHTS.search(line)
        loss = LOSS.search(line)
        yield Point(
            step=int(m["step"]),
            speed=per_device(to_float(m["tokens"]), shape),
            seconds=seconds,
            check=to_float(weights[1]) / seconds if weights and seconds > 0 else None,
            metrics=(("tflops_per_device", to_float(m["tflops"])),) + ((("loss", to_float(loss[1])),) if loss else ()),
        )


FORMATS = (
    PeerFormat(
        name="maxtext",
        description="MaxText `completed step: i, seconds: s, TFLOP/s/device: f, Tokens/s/device: t, ...` lines",
        signature=re.compile(r"\bcompleted step: \d+, seconds: .*Tokens/s/device: "),
        read=read,
        rules=("printed",),
        warmup=2,
        window=None,
        last_only=True,
        unit="tokens/s",
        printed="per device",
        check_reading="total_weights / seconds (the step's real tokens over its time: lower where padding is)",
        practice="MaxText guide 'Understand logs and metrics': read the last step; Tokens/s/device x devices",
    ),
)
