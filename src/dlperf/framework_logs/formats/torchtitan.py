"""torchtitan metric lines (colour escapes and `[rankN]:` tags are stripped beforehand):

[titan] 2025-01-10 12:00:00,123 - root - INFO - step: 10  loss:  9.1234  memory: 30.12GiB(38.07%)  tps: 6,213
tflops: 359.84  mfu: 36.38%

`tps` is tokens per second PER DEVICE over the last log interval (torchtitan train.py: the tokens seen since the
last log over the time since it), `memory` the device's peak reserved memory. Rule (the seeds' method): step 1
(compiling, start-up) skipped; the later log intervals' tokens over their time (each interval's steps at its
`tps`, every step the same tokens), global = x devices. torchtitan's own practice (its published autoresearch
results, `results.tsv` / `learnings.md`: the `tps` of the last printed step, step 10 of a 10-step run) is kept
beside it (`own_reading`): on 10-step runs printed every step it differs from the window's by 2-4 %. When several
ranks print, their lines for one step are combined (median).

Mixture-of-experts runs (deepseek_v3, qwen3 MoE, llama4) print the same line; their aux loss and tokens per expert
are `extra_metrics` that torchtitan's metrics.py sends to TensorBoard / W&B only, never to this line, so a log
gives none (`mfu: N/A` where the device's peak is unknown).
"""

from __future__ import annotations

import functools
import re

from dlperf.framework_logs.base import (
    NUMBER,
    InOrder,
    LogFormat,
    Point,
    RunShape,
    each_line,
    metrics_in,
    per_device,
    search_at_first,
    to_float,
)

STEP = re.compile(r"\bstep:\s*(?P<step>\d+)\s+loss:")  # where LINE is tried (base.search_at_first)
LINE = re.compile(rf"{STEP.pattern}.*?\btps:\s*(?P<tps>[\d,]+(?:\.\d+)?)")
MEMORY = re.compile(rf"\bmemory:\s*({NUMBER})GiB")
EXTRA = {
    "tflops_per_device": re.compile(rf"\btflops:\s*({NUMBER})"),
    "mfu_percent": re.compile(rf"\bmfu:\s*({NUMBER})%"),
}


def _point(m: re.Match[str], shape: RunShape) -> Point:
    memory = MEMORY.search(m.string)
    speed = per_device(to_float(m["tps"]), shape)
    return Point(step=int(m["step"]), speed=speed, own=speed, memory_mib=to_float(memory[1]) * 1024 if memory else None,
                 metrics=metrics_in(m.string, EXTRA))  # fmt: skip


FORMATS = (
    LogFormat(
        name="torchtitan",
        description="torchtitan `step: i loss: ... memory: M GiB ... tps: N tflops: F mfu: M%` lines",
        signature=InOrder((r"step:\s*\d+\b", "loss:", r"tps:\s*[\d,]")),
        clue=("tps:",),
        read=each_line(functools.partial(search_at_first, LINE, STEP), _point, "tps:"),
        warmup=1,
        unit="tokens/s",
        printed="per device",
        rates_over_time=True,
        flops_count="torchtitan's 6N + 12·L·H·Q·T per token (PaLM; no causal halving)",
        own_reading="torchtitan's own practice (autoresearch results.tsv): the last printed step's tps x devices",
        practice="torchtitan train.py tps: the log intervals after step 1, their tokens over their time, x devices",
    ),
)
