"""torchtune's metric lines (its DiskLogger / StdoutLogger `log_dict`: `Step N | name:value ...`):

Step 9 | loss:0.6810362935066223 lr:2e-05 tokens_per_second_per_gpu:698.9489335304891

What the figure is (torchtune recipes/full_finetune_single_device.py and full_finetune_distributed.py, `train()`,
pytorch/torchtune 01067f6): at every `log_every_n_steps`-th optimizer step, `tokens_per_second_per_gpu` =
num_tokens / time_per_step: the tokens since the last log (the labels' unmasked tokens; before late 2024
`batch["tokens"].numel()`, padding included) over the wall time since then (`t0`, reset after each log: data loading
and the log itself included), one device's (the distributed recipe divides by the world size). It is per device.

torchtune prints neither the tokens nor the time of a step, only their ratio, so the window's tokens over its time
can be had only where each step trains the same tokens (packed or fixed-length batches): the rule combines the
printed rates so (each line's steps at its rate: their harmonic mean), the first 5 steps skipped. With
variable-length batches the tokens differ by step and the figure is uncertain by their spread: the arithmetic mean
of the same rates is kept beside it (`peer_metrics.mean_of_printed_rates`, global), and the record says so.
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, each_line, metrics_in, per_device, to_float

LINE = re.compile(rf"^Step (?P<step>\d+) \|.*\btokens_per_second_per_gpu:(?P<rate>{NUMBER})")
LOSS = {"loss": re.compile(rf"\bloss:({NUMBER})")}
SAME_TOKENS = (
    "torchtune prints only each step's tokens/s: combined as if every step trained the same tokens (packed or "
    "fixed-length batches); see peer_metrics.mean_of_printed_rates for the spread"
)


def _point(m: re.Match[str], shape: RunShape) -> Point:
    speed = per_device(to_float(m["rate"]), shape)
    metrics = (("mean_of_printed_rates", speed), *metrics_in(m.string, LOSS))
    return Point(step=int(m["step"]), speed=speed, note=SAME_TOKENS, metrics=metrics)


FORMATS = (
    LogFormat(
        name="torchtune",
        description="torchtune `Step N | loss:... lr:... tokens_per_second_per_gpu:R` metric lines",
        signature=re.compile(rf"^Step \d+ \|.*\btokens_per_second_per_gpu:{NUMBER}"),
        clue=("tokens_per_second_per_gpu:",),
        read=each_line(LINE.match, _point, "Step "),
        warmup=5,
        unit="tokens/s",
        printed="per device",
        rates_over_time=True,
        practice="torchtune recipes train(): tokens_per_second_per_gpu per logged step x devices, the steps after the "
        "first 5 combined as tokens over time (each step's tokens equal)",
    ),
)
