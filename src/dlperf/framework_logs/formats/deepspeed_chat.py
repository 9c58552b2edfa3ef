"""DeepSpeed-Chat's RLHF step lines (step 3, `--enable_hybrid_engine`), printed by DeepSpeed's hybrid engine on rank 0
(one line, wrapped here):

|E2E latency=3.73s |Gather latency=0.00s (0.00%) |Generate time=2.78s (74.61%) |Training time=0.74s (19.84%)
|Others=0.21 (5.55%)|CurSamplesPerSec=17.17 |AvgSamplesPerSec=10.92

What the figures are (deepspeed/runtime/hybrid_engine.py `DeepSpeedHybridEngine.eval`, DeepSpeed 0.9+): each line
is printed when the next experience generation starts, `latency` the time since the one before (the whole RLHF
step: generation, the actor's and critic's training, the rest); `CurSamplesPerSec` = `_total_batch_size` /
latency, that batch the first `generate` call's prompts x the world size: GLOBAL prompts/s of one step, needing no
batch from the file's path; `AvgSamplesPerSec` the same over every printed step. The engine lines in the same log
(`[Rank 0] step=`, the ThroughputTimer's, deepspeed.py) time the actor's training alone, a part of each step.

Rule: the steps after the first (whose time holds the first generation's set-up: 7.99 s against ~3.8 s after it),
each line's step at its CurSamplesPerSec (the window's samples over its time); the last AvgSamplesPerSec (every
step) is kept as the framework's own reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, to_float

LINE = re.compile(
    rf"^\|E2E latency=(?P<s>{NUMBER})s \|.*\|CurSamplesPerSec=(?P<cur>{NUMBER}) \|AvgSamplesPerSec=(?P<avg>{NUMBER})"
)


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    steps = 0
    for line in lines:
        if line.startswith("|E2E latency=") and (m := LINE.match(line)):
            steps += 1
            yield Point(step=steps, speed=to_float(m["cur"]), seconds=to_float(m["s"]), own=to_float(m["avg"]))


FORMATS = (
    LogFormat(
        name="deepspeed-chat",
        description="DeepSpeed-Chat's hybrid-engine `|E2E latency=Ts |... |CurSamplesPerSec=S |AvgSamplesPerSec=A` "
        "lines (its RLHF steps)",
        signature=re.compile(r"^\|E2E latency=[\d.]+s \|.*\|CurSamplesPerSec=[\d.]+ \|AvgSamplesPerSec="),
        clue=("|E2E latency=",),
        read=read,
        warmup=1,
        rates_over_time=True,
        own_reading="DeepSpeed-Chat's AvgSamplesPerSec at the last kept step (every printed step)",
        practice="deepspeed/runtime/hybrid_engine.py: generation batch x world size / each RLHF step's E2E latency, "
        "the first step dropped",
    ),
)
