"""DeepSpeed engine logs: its ThroughputTimer lines and the `[Rank 0] step=` lines (an `[asctime]` prefix each):

[2023-07-24 13:21:34,636] [INFO] [logging.py:96:log_dist] [Rank 0] step=20, skipped=17, lr=[0.0001], mom=[...]
[2023-07-24 13:21:34,636] [INFO] [timer.py:215:stop] epoch=0/micro_step=20/global_step=20,
RunningAvgSamplesPerSec=175.20191347781497, CurrSamplesPerSec=119.40314143577992, MemAllocated=0.06GB, ...

What the figures are (deepspeed/utils/timer.py, `ThroughputTimer`, v0.10-0.17: `stop()` and `avg_samples_per_sec()`;
the engine makes it with `batch_size=train_batch_size()`, the GLOBAL batch, gradient accumulation included): the
timer runs from each micro step's forward to the optimizer step, on every global step after `start_step` = 2, and
adds each stretch to `total_elapsed_time`; `RunningAvgSamplesPerSec` = batch x (global_step - 2) /
total_elapsed_time, `CurrSamplesPerSec` = batch / the printed step's own time (one step of every `steps_per_print`).
Older DeepSpeed printed `E/S, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...` (2022) and `E/S,
SamplesPerSec=...` (2020-21, the running average alone), S counting steps within the epoch; read where E is 0.

So the timer's own clock at a printed step is total_elapsed_time = batch x (step - 2) / RunningAvg, and the
samples between two printed steps a < b over their timer time are (b - a) / ((b - 2)/R_b - (a - 2)/R_a): no
batch is needed. Rule (the seeds' method): the first printed interval (steps 3-10 at the default
`steps_per_print` 10: allocation, autotuning) skipped, the samples of the later printed intervals over the timer's
time for them. The timer leaves out what happens between steps (data loading, checkpoint saving), which the time
stamps hold: the second reading is the stamps x steps x the global batch over the intervals without a checkpoint
save, at the engine's own batch where the log prints its configuration (`DeepSpeedConfig.print`: `[config.py:...:
print]   train_batch_size ............. 16`), else at the global batch given (the file's path), which the timer's
figure does not depend on: where the timer is the faster of the two and the batch is the given one, either can be
the cause and the log is refused, both named (crosscheck.py). DeepSpeed's own figure, the last
RunningAvgSamplesPerSec (every step after step 2), is kept beside it.
A log of `[Rank 0] step=` lines alone (no timer lines: DeepSpeed-Chat, HF Trainer + DeepSpeed) is read by their
time stamps x steps x the global batch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from dlperf.framework_logs.base import ISO_TIME, NUMBER, AnyCase, LogFormat, Point, RunShape, stamp_in, to_float

START_STEP = 2  # ThroughputTimer's default start_step: steps 1-2 are never timed
STAMP = re.compile(rf"^\s*\[({ISO_TIME})\]")
STEP = re.compile(r"\[Rank 0\] step=(\d+), skipped=\d+, lr=")
TIMER = re.compile(
    rf"(?:\bepoch=(?P<epoch>\d+)/micro_step=\d+/global_step=(?P<global>\d+)|\] (?P<e>\d+)/(?P<s>\d+)), "
    rf"(?:RunningAvgSamplesPerSec|SamplesPerSec)=(?P<avg>{NUMBER})"
)
CURRENT = re.compile(rf"\bCurrSamplesPerSec=({NUMBER})")
MEMORY = re.compile(rf"\bMaxMemAllocated=({NUMBER})GB")
CONFIG_BATCH = re.compile(r"\[config\.py:\d+:print\]\s+train_batch_size \.+ (\d+)\s*$")
PRINTED_BATCH = "samples per step: the engine's printed train_batch_size"
SAVE = re.compile(r"Saving model checkpoint|Checkpoint global_step\d+ is about to be saved|\bsaving checkpoint", re.I)


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    timer = _TimerLines(shape.global_batch)
    for line in lines:
        yield from timer.feed(line)
    yield from timer.flush_step_line()


class _TimerLines:
    """The timer's printed intervals as its lines come; `step=` lines stand alone where no timer line follows."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.printed_batch = False  # the batch is the engine's own printed train_batch_size, not the path's
        self.previous: tuple[int, float] | None = None  # (printed step, the timer's clock there in steps / (samples/s))
        self.pending: tuple[int, float | None] | None = None  # a `step=` line no timer line has followed yet
        self.saved = False  # a checkpoint was saved since the last point: the stamps hold it, the timer does not

    def feed(self, line: str) -> Iterator[Point]:
        if (s := STEP.search(line)) is not None:
            yield from self.flush_step_line()
            self.pending = (int(s[1]), stamp_in(STAMP, line))
            return
        m = TIMER.search(line) if "SamplesPerSec=" in line else None
        if m is None:
            self._between(line)
            return
        step = timer_step(m)
        if step is None:
            return
        self.pending = None
        average = to_float(m["avg"])
        if step > START_STEP and average > 0:
            yield self._interval(step, average, line)
            self.saved = False

    def _between(self, line: str) -> None:
        """A line between the engine's own: a checkpoint save, or the engine's configuration with its batch."""
        self.saved = self.saved or SAVE.search(line) is not None
        if "train_batch_size" in line and (c := CONFIG_BATCH.search(line)) and int(c[1]) > 0:
            self.batch, self.printed_batch = int(c[1]), True

    def flush_step_line(self) -> Iterator[Point]:
        """The `step=` line no timer line followed: a point of its time stamp alone."""
        if self.pending is not None:
            yield Point(
                step=self.pending[0], timestamp=self.pending[1], paused=self.saved, **self._counted(self.pending[0])
            )
            self.saved = False

    def _interval(self, step: int, average: float, line: str) -> Point:
        """The printed interval ending at `step`: the batch over the timer's time per step since the last print."""
        clock = (step - START_STEP) / average
        start, before = self.previous if self.previous is not None and self.previous[0] < step else (START_STEP, 0.0)
        self.previous = (step, clock)
        seconds = self.batch * (clock - before) / (step - start) if clock > before else 0.0
        memory = MEMORY.search(line)
        current = CURRENT.search(line)
        return Point(
            step=step,
            start=start,
            seconds=seconds,
            timestamp=stamp_in(STAMP, line),
            paused=self.saved,
            own=average,
            memory_mib=to_float(memory[1]) * 1024 if memory else None,
            metrics=(("curr_samples_per_s", to_float(current[1])),) if current else (),
            **self._counted(step),
        )

    def _counted(self, step: int) -> dict[str, Any]:
        """The samples trained to `step` and per step at the engine's printed batch; nothing at the path's."""
        return {"samples": step * self.batch, "batch": self.batch, "note": PRINTED_BATCH} if self.printed_batch else {}


def timer_step(m: re.Match[str]) -> int | None:
    """The global step of a timer line; None for an old line of epoch E > 0, which counts steps within its epoch
    (the timer's clock all of them)."""
    if m["global"] is not None:
        return int(m["global"])
    return int(m["s"]) if int(m["e"]) == 0 else None


FORMATS = (
    LogFormat(
        name="deepspeed",
        description="DeepSpeed's ThroughputTimer `epoch=E/micro_step=M/global_step=G, RunningAvgSamplesPerSec=R, "
        "CurrSamplesPerSec=C` (and older `E/S, SamplesPerSec=R`) lines, or its `[Rank 0] step=G, skipped=...` lines",
        signature=re.compile(
            r"\[Rank 0\] step=\d+, skipped=\d+, lr="
            r"|\bepoch=\d+/micro_step=\d+/global_step=\d+, RunningAvgSamplesPerSec="
            r"|\] \d+/\d+, (?:RunningAvg)?SamplesPerSec="
        ),
        clue=("[Rank 0] step=", "SamplesPerSec="),
        reads=(
            "train_batch_size .",
            AnyCase("saving model checkpoint"),
            AnyCase("checkpoint global_step"),
            AnyCase("saving checkpoint"),
        ),
        read=read,
        rules=("printed", "timestamp"),
        warmup=10,
        printed_from="seconds",
        batch_free=True,
        memory_kind="allocated",
        stamps_when_unprinted=True,
        yields_to=("gpt-neox", "megatron", "deepspeed-chat", "deepspeed-pipe"),
        printed_part="forward, backward and the optimizer step (its ThroughputTimer; no data loading, nothing between "
        "steps)",
        own_reading="DeepSpeed's own RunningAvgSamplesPerSec at the last kept step (every step after step 2)",
        practice="deepspeed/utils/timer.py ThroughputTimer: the timer's own clock, batch x (step - 2) / "
        "RunningAvgSamplesPerSec; samples of the printed intervals after step 10 over its time for them",
    ),
)
