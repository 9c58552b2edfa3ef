"""MaxText step lines (metric_logger.py; a glog prefix such as `I0601 22:14:54 metric_logger.py:181] ` is allowed):

completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, total_weights: 196608,
loss: 10.374
completed step: 9, seconds: 4.110, TFLOP/s/device: 251.368, loss: 1.898           (MaxText before July 2024)

`seconds` is the step's measured time, `Tokens/s/device` the step's tokens per device over it (MaxText
metric_logger.py, `Tokens/s/device` = per_device_tokens / step_time, added by PR 761 in July 2024),
`TFLOP/s/device` MaxText's model FLOPs per device over the same time, `total_weights` the step's tokens that count
toward the loss, over all devices. The older line has no token figure: its tokens per device per step are
`per_device_batch_size` x `max_target_length`, read from the run's `Config param ...` lines (a log without them is
refused: its token count is unknown).

Rule (the seeds' method): steps 0 (compiling) and 1 (dispatched before step 0's time was taken) skipped; the
later steps' tokens over their summed time, global = per device x devices. MaxText's own practice (its guide
"Understand logs and metrics": "we usually read them from the last step") is kept beside it: the last step's figure
(`own_reading`). A step printing more than 1e16 FLOP/s per device (maxtest's step 2: 0.002 s, 917,442 TFLOP/s/device,
timed while only dispatched) is no step time and is left out. The second reading is total_weights / seconds:
global tokens per second without the device count; MaxText counts only real tokens in total_weights (padding
carries no weight), so on a real data set it is lower than the tokens the figure counts (the guide's C4 run:
1.26x); synthetic data pads nothing.

A mixture-of-experts run prints the same line; since April 2026 (metric_logger.py, where `num_experts > 1`) it ends
with `moe_lb_loss: x` (the load-balancing loss, 0.0 where none is configured), kept in `peer_metrics.moe_lb_loss`
(the mean over the kept steps). MaxText prints no tokens per expert.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, metrics_in, per_device, to_float

LINE = re.compile(
    rf"\bcompleted step: (?P<step>\d+), seconds: (?P<seconds>{NUMBER}), TFLOP/s/device: (?P<tflops>{NUMBER}), "
    rf"(?:Tokens/s/device: (?P<tokens>{NUMBER})|loss: )"
)
WEIGHTS = re.compile(rf"\btotal_weights: ({NUMBER})")
EXTRA = {
    "loss": re.compile(rf"\bloss: ({NUMBER})"),
    "moe_lb_loss": re.compile(rf"\bmoe_lb_loss: ({NUMBER})"),  # printed where num_experts > 1 (since April 2026)
}
CONFIG = re.compile(rf"\bConfig param (per_device_batch_size|max_target_length): ({NUMBER})\s*$")
OLD_LINE = "MaxText's older line: Tokens/s/device = per_device_batch_size x max_target_length (its config) / seconds"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    config: dict[str, float] = {}
    for line in lines:
        if "completed step:" in line and (m := LINE.search(line)):
            yield _point(m, line, config, shape)
        elif "Config param" in line and (c := CONFIG.search(line)):
            config[c[1]] = to_float(c[2])


def _point(m: re.Match[str], line: str, config: dict[str, float], shape: RunShape) -> Point:
    seconds = to_float(m["seconds"])
    tokens, note = _tokens_per_device(m, seconds, config)
    weights = WEIGHTS.search(line)
    speed = per_device(tokens, shape)
    return Point(
        step=int(m["step"]),
        start=int(m["step"]),  # the line times its own step
        speed=speed,
        seconds=seconds,
        own=speed,
        note=note,
        check=to_float(weights[1]) / seconds if weights and seconds > 0 else None,
        metrics=(("tflops_per_device", to_float(m["tflops"])), *metrics_in(line, EXTRA)),
    )


def _tokens_per_device(m: re.Match[str], seconds: float, config: dict[str, float]) -> tuple[float, str | None]:
    """The line's tokens/s per device, printed or (older lines) from the config's batch and length; how, for the
    record."""
    if m["tokens"] is not None:
        return to_float(m["tokens"]), None
    if len(config) == 2:
        per_step = config["per_device_batch_size"] * config["max_target_length"]
        return (per_step / seconds if seconds > 0 else 0.0), OLD_LINE
    raise DataError(
        "its MaxText lines print no Tokens/s/device (MaxText before July 2024) and the log holds no "
        "`Config param per_device_batch_size` and `max_target_length` lines: its tokens are unknown"
    )


FORMATS = (
    LogFormat(
        name="maxtext",
        description="MaxText `completed step: i, seconds: s, TFLOP/s/device: f, Tokens/s/device: t, ...` lines (and "
        "the older line without Tokens/s/device, with its config lines)",
        # the config lines come first, and the older line needs them
        signature=re.compile(
            rf"\bcompleted step: \d+, seconds: {NUMBER}, TFLOP/s/device: "
            r"|\bConfig param (?:max_target_length|per_device_batch_size): "
        ),
        clue=("completed step: ", "Config param "),
        read=read,
        warmup=2,
        unit="tokens/s",
        printed="per device",
        rates_over_time=True,
        flops_count="MaxText's calculate_tflops_training_per_device (the attention term halved for causality since "
        "July 2025, and before May 2024)",
        own_reading="MaxText's own practice (its guide: read the last step): the last step's Tokens/s/device x devices",
        check_reading="total_weights / seconds (the step's real tokens over its time: lower where padding is)",
        check_counts_less=True,
        practice="MaxText metric_logger.py: the steps after step 1, their tokens over their summed seconds, x devices",
    ),
)
