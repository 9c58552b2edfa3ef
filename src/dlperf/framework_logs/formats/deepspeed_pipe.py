"""DeepSpeed's pipeline engine lines (`PipelineEngine.train_batch`, rank 0, every `steps_per_print` steps):

steps: 2 loss: 12.8004 iter time (s): 145.206 samples/sec: 7.052

What the figure is (deepspeed/runtime/pipe/engine.py `train_batch`, DeeperSpeed 65d9f992 and DeepSpeed since
2020; newer ones print it through `log_dist`, after `[Rank 0] `, extra losses between `loss` and `iter time`):
`iter time` = the `train_batch` timer's time since the last line over `steps_per_print`, that timer running over
all of `train_batch` (every micro-batch's load, forward and backward, the pipeline's sends, the optimizer step);
`samples/sec` = `train_batch_size()` / that time: GLOBAL samples/s of whole iterations, needing no batch from the
file's path. The ThroughputTimer lines of the same run (deepspeed.py) restart at each micro-batch's forward, so
they time a part of an iteration.

Rule (the seeds' method; DeepSpeed publishes none): the first 10 steps skipped (deepspeed.py's first printed
interval), each kept line's steps at its rate (the window's samples over its time). Megatron-DeepSpeed runs print
these lines beside their own iteration lines: those are the log's (`yields_to`, extract.py's detection).
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, each_line, loss, stamp_in, to_float
from dlperf.framework_logs.formats.deepspeed import STAMP

LINE = re.compile(
    rf"(?:^|\[Rank 0\] )steps: (?P<step>\d+) loss: (?P<loss>{NUMBER}|nan) (?:.*? )?"
    rf"iter time \(s\): (?P<s>{NUMBER}) samples/sec: (?P<speed>{NUMBER})"
)


def _point(m: re.Match[str], shape: RunShape) -> Point:
    return Point(step=int(m["step"]), speed=to_float(m["speed"]), seconds=to_float(m["s"]),
                 timestamp=stamp_in(STAMP, m.string), metrics=loss(m["loss"]))  # fmt: skip


FORMATS = (
    LogFormat(
        name="deepspeed-pipe",
        description="DeepSpeed's pipeline engine `steps: N loss: L iter time (s): T samples/sec: S` lines",
        signature=re.compile(r"(?:^|\[Rank 0\] )steps: \d+ loss: \S+ (?:.*? )?iter time \(s\): [\d.]+ samples/sec: "),
        clue=("iter time (s): ",),
        read=each_line(LINE.search, _point, "samples/sec: "),
        rules=("printed", "timestamp"),
        warmup=10,
        rates_over_time=True,
        yields_to=("gpt-neox", "megatron"),
        practice="deepspeed/runtime/pipe/engine.py train_batch: train_batch_size / the train_batch timer's time per "
        "step, the first 10 steps dropped",
    ),
)
