"""GPT-NeoX's `training_log` lines (EleutherAI/gpt-neox), printed by rank 0 every `log_interval` iterations:

 samples/sec: 7.799 | iteration       10/  320000 | elapsed time per iteration (ms): 4103.3 | learning rate: ... |

What the figure is (megatron/logging.py `training_log`, gpt-neox ea7aefd8): `samples_per_sec = train_batch_size /
iteration_time`, `iteration_time` the "interval time" timer's elapsed time since the line before over
`log_interval`. That timer is started once before the loop (megatron/training.py `train`) and read with a reset at
every line, so it holds all that ran between two lines (data loading, evaluation, checkpoint saving): GLOBAL
samples/s that need no batch from the file's path. The same runs print DeepSpeed's ThroughputTimer lines
(`RunningAvgSamplesPerSec=`, deepspeed.py), which time forward, backward and the optimizer step only.

Rule: NeoX's own figure, each kept line's iterations at its rate (the window's samples over its time), after the
first 10 iterations (DeepSpeed's first printed interval). Second reading: the ThroughputTimer's own clock over the
same iterations, batch-free too (deepspeed.py); it times a part of each iteration, so where it is the faster of the
two the printed figure, which covers the whole, stands and the timer's is kept as evidence (crosscheck.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, metrics_in, to_float
from dlperf.framework_logs.formats.deepspeed import START_STEP, TIMER, timer_step

LINE = re.compile(
    rf"^\s*samples/sec: (?P<speed>{NUMBER}) \| iteration\s+(?P<step>\d+)/\s*(?P<steps>\d+) \| "
    rf"elapsed time per iteration \(ms\): (?P<ms>{NUMBER}) \|"
)
LOSS = {"loss": re.compile(rf"\| lm_loss: ({NUMBER}) \|")}
KEPT_CLOCKS = 64  # the timer's latest printed steps held for the next NeoX line


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    clocks: dict[int, float] = {START_STEP: 0.0}  # step -> the timer's clock there: (step - 2) / RunningAvg
    previous: int | None = None
    for line in lines:
        if "SamplesPerSec=" in line and (t := TIMER.search(line)) and (step := timer_step(t)) is not None:
            if step > START_STEP and to_float(t["avg"]) > 0:
                clocks[step] = (step - START_STEP) / to_float(t["avg"])
                while len(clocks) > KEPT_CLOCKS:
                    del clocks[min(clocks)]
        elif "samples/sec:" in line and (m := LINE.match(line)):
            step = int(m["step"])
            yield Point(step=step, run=int(m["steps"]), speed=to_float(m["speed"]), seconds=to_float(m["ms"]) / 1000,
                        check=_timer_rate(clocks, previous, step), metrics=metrics_in(line, LOSS))  # fmt: skip
            previous = step


def _timer_rate(clocks: dict[int, float], first: int | None, last: int) -> float | None:
    """The ThroughputTimer's samples/s over the iterations (first, last]: the steps over its clock between them."""
    if first is None or first not in clocks or last not in clocks or clocks[last] <= clocks[first]:
        return None
    return (last - first) / (clocks[last] - clocks[first])


FORMATS = (
    LogFormat(
        name="gpt-neox",
        description="GPT-NeoX `samples/sec: S | iteration i/n | elapsed time per iteration (ms): T |` lines, "
        "DeepSpeed's ThroughputTimer the second reading",
        signature=re.compile(r"^\s*samples/sec: [\d.]+ \| iteration\s+\d+/\s*\d+ \| elapsed time per iteration"),
        clue=("samples/sec: ",),
        reads=("SamplesPerSec=",),
        read=read,
        warmup=10,
        rates_over_time=True,
        check_reading="DeepSpeed's ThroughputTimer over the same iterations (its own clock, (step - 2) / "
        "RunningAvgSamplesPerSec)",
        check_part="forward, backward and the optimizer step (DeepSpeed's ThroughputTimer)",
        practice="gpt-neox megatron/logging.py training_log: train_batch_size / the interval timer's time per "
        "iteration (everything between two lines), the first 10 iterations dropped",
    ),
)
