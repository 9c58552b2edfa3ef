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
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import NUMBER, HookTrace, LogFormat, Point, RunShape, each_line, to_float

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
)
