"""Hugging Face `transformers.Trainer` logs. Per step it prints only dicts without time (`{'loss': 2.31,
'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}`); the one throughput is the whole run's, printed at the
end by `speed_metrics` as a dict (4.x: numbers; 5.x: numbers as quoted strings) and, in the example scripts, as
the `***** train metrics *****` block:

{'train_runtime': 123.4, 'train_samples_per_second': 45.6, 'train_steps_per_second': 1.43, 'train_loss': 2.1, ...}
{'train_runtime': '22.4', 'train_samples_per_second': '10.71', 'train_steps_per_second': '1.339', ...}   (5.x)
  train_samples_per_second =     45.6

What it includes (transformers' Trainer: `speed_metrics("train", start_time, num_samples, num_steps)`): the time
from the start of the training loop to its end, so the first steps (compiling, warm-up), evaluation and checkpoint
saving inside training are in it; the samples are those the loop was planned to train (epochs x data set, or
max_steps x total batch), GLOBAL over every process and gradient-accumulation step. The record says so. In an
instrumented run the hook marks that span (it wraps `speed_metrics`, whose train_runtime is `time.time()` at its
call less the loop's `start_time`: transformers/trainer.py `Trainer._inner_training_loop`), and the hook's samples
over it are compared with the printed figure, like for like.

A fork's per-step dicts (microsoft/huggingface-transformers PR 7, "Throughput instrumentation per training step",
its own sample prints between the tqdm bar's lines), one per optimizer step:

{'train_step_runtime': 0.6309, 'train_step_samples_per_second': 57.063, 'epoch': 0.98}

are `speed_metrics("train_step", ...)` of one step: its time and its GLOBAL samples over it (runtime x rate is
36.00 on every printed line: the step's samples, so no batch from the path). The PR's code is in no stored branch:
what the time covers is read from the figures only. A dict is the step the bar counted last (ProgressCallback
updates the bar at the step's end, then on_log writes the dict above it); one before any bar line is the bar's
first count; an evaluation's bar (another total) counts no steps. Rule (the seeds' method): the steps after the
first 5, each step's samples over the steps' summed runtime.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from dlperf.framework_logs.base import NUMBER, HookTrace, LogFormat, Point, RunShape, each_line, to_float
from dlperf.framework_logs.formats.tqdm_bar import BAR

SPEED = re.compile(rf"['\"]?train_samples_per_second['\"]?\s*[:=]\s*['\"]?(?P<v>{NUMBER})")
STEPS = re.compile(rf"['\"]?train_steps_per_second['\"]?\s*[:=]\s*['\"]?(?P<v>{NUMBER})")
WHOLE_RUN = (
    "Trainer's whole-run train_samples_per_second: planned samples / the training loop's time, which includes its "
    "first steps, evaluation and checkpoint saving"
)


def _point(m: re.Match[str], shape: RunShape) -> Point:
    speed, steps = to_float(m["v"]), STEPS.search(m.string)
    note = WHOLE_RUN
    if steps and to_float(steps["v"]) > 0:  # the samples of one optimizer step, gradient accumulation included
        per_step = speed / to_float(steps["v"])
        note += f"; {per_step:.4g} samples per optimizer step (global batch {shape.global_batch} given)"
    return Point(step=1, start=1, speed=speed, note=note)


STEP = re.compile(
    rf"['\"]train_step_runtime['\"]:\s*['\"]?(?P<t>{NUMBER})['\"]?,\s*"
    rf"['\"]train_step_samples_per_second['\"]:\s*['\"]?(?P<v>{NUMBER})"
)


def _training_bar(line: str, total: str | None) -> tuple[int, str] | None:
    """The bar's count and total where the line is a bar of the training's total (the first bar's)."""
    if ("it/s" in line or "s/it" in line) and (b := BAR.search(line)) and b["total"] == (total or b["total"]):
        return int(b["n"]), b["total"]
    return None


def read_steps(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    """Each per-step dict at the training bar's last count: the first bar's total is the run's steps, and a bar of
    another total (an evaluation's) counts no steps. Dicts before any bar line are the steps up to its first count;
    with no bar at all, one step each."""
    count: int | None = None
    total: str | None = None
    held: list[Point] = []
    for line in lines:
        if "train_step_samples_per_second" in line and (m := STEP.search(line)):
            seconds = to_float(m["t"])
            point = Point(step=count, seconds=seconds, batch=to_float(m["v"]) * seconds, resolution=0.00005)
            if count is None:
                held.append(point)
            else:
                yield point
        elif bar := _training_bar(line, total):
            count, total = bar
            yield from (replace(point, step=count - len(held) + 1 + i) for i, point in enumerate(held))
            held = []
    yield from (replace(point, step=i + 1) for i, point in enumerate(held))


def same_stretch(
    trace: HookTrace, _points: list[Point], _kept: tuple[int, int] | None
) -> tuple[float, None, str] | None:
    """The hook's samples of the steps inside train_runtime's span over its length."""
    if trace.train is None or trace.train[1] <= trace.train[0]:
        return None
    begin, end = trace.train
    inside = [step for step, t in trace.times.items() if begin < t <= end]
    if not inside:
        return None
    what = f"transformers' train_runtime span ({end - begin:.4g} s, steps {min(inside)}-{max(inside)})"
    return sum(trace.samples[step] for step in inside) / (end - begin), None, what


FORMATS = (
    LogFormat(
        name="hf-trainer",
        description="Hugging Face Trainer: the whole-run `train_samples_per_second` (dict or train metrics block)",
        signature=SPEED,
        clue=("train_samples_per_second",),
        read=each_line(SPEED.search, _point),
        warmup=0,
        last_only=True,
        counts_planned=True,
        practice="transformers' Trainer speed_metrics: planned train samples / train_runtime (whole run, "
        "evaluation and saving included); no per-step time is printed, so there is no second reading",
        same_stretch=same_stretch,
    ),
    LogFormat(
        name="hf-trainer-steps",
        description="a Hugging Face Trainer fork's per-step dicts (`'train_step_runtime': T, "
        "'train_step_samples_per_second': S`)",
        signature=re.compile(rf"['\"]train_step_runtime['\"]:\s*['\"]?{NUMBER}['\"]?,\s*['\"]train_step_samples_per_"),
        clue=("train_step_samples_per_second",),
        reads=("it/s", "s/it"),
        read=read_steps,
        warmup=5,
        printed_from="seconds",
        practice="microsoft/huggingface-transformers PR 7: each step's global samples (runtime x rate) over its "
        "train_step_runtime, the first 5 steps dropped (the seeds' method)",
    ),
)
