"""NeMo 2 step lines (NeMo's Lightning progress logging; NeMo's performance recipes add `TFLOPS_per_GPU`, its
throughput callback `tokens_per_sec_per_gpu`):

Training epoch 0, iteration 74/99 | lr: 1.124e-05 | global_batch_size: 128 | global_step: 74 | ... |
reduced_train_loss: 11.87 | train_step_timing in s: 8.768 | TFLOPS_per_GPU: 865.7 | consumed_samples: 9600

`train_step_timing in s` is that iteration's time; sequences/s = global_batch_size / it (the tokens per sequence are
the recipe's `seq_length`, not in these lines: the printed `tokens_per_sec_per_gpu`, global_batch_size x seq_length /
it / GPUs, is kept beside the figure, not a second reading of it). A time that is no positive number (NeMo 24.09
printed `train_step_timing in s: -12.71` after a 13.75 s step) is refused and counted, never dropped unseen.
Rule (NVIDIA's DGX Cloud benchmarking recipes for NeMo, e.g. llama3.1/README.md: "the early training steps
typically take much longer time (with input prefetch, activation memory allocation, and JIT compilation), we use the
parse_train_timing.sh script to analyze iterations 11-44"): iterations 11 to 44, their sequences over their summed
step times. The planned length (`iteration i/N`) tells runs apart. Megatron-Bridge prints Megatron-LM's
`iteration i/ N | ... elapsed time per iteration (ms)` lines, which the `megatron` reader reads.
"""

from __future__ import annotations

import re

from dlperf.framework_logs.base import NUMBER, InOrder, LogFormat, Point, RunShape, each_line, to_float

ITERATION = re.compile(r"\bTraining epoch \d+, iteration (\d+)/(\d+) \|")
FIELDS = {
    name: re.compile(rf"\| {re.escape(name)}: ({NUMBER})")
    for name in (
        "global_batch_size",
        "train_step_timing in s",
        "TFLOPS_per_GPU",
        "consumed_samples",
        "reduced_train_loss",
        "max_memory_reserved",
        "tokens_per_sec_per_gpu",
    )  # fmt: skip
}
MIB = 1024 * 1024


METRICS = (  # (NeMo's name, the record's)
    ("TFLOPS_per_GPU", "tflops_per_device"),
    ("tokens_per_sec_per_gpu", "tokens_per_s_per_device"),
    ("reduced_train_loss", "loss"),
)


def _point(iteration: re.Match[str], shape: RunShape) -> Point | None:
    fields = {name: to_float(m[1]) for name, pattern in FIELDS.items() if (m := pattern.search(iteration.string))}
    seconds = fields.get("train_step_timing in s")
    if seconds is None:
        return None
    batch = fields.get("global_batch_size", float(shape.global_batch))
    reserved = fields.get("max_memory_reserved")
    return Point(
        step=int(iteration[1]),
        speed=batch / seconds if seconds > 0 else None,  # a time that is no time is refused, and counted
        seconds=seconds,
        samples=fields.get("consumed_samples"),
        run=int(iteration[2]),
        memory_mib=reserved / MIB if reserved is not None else None,
        metrics=tuple((key, fields[name]) for name, key in METRICS if name in fields),
    )


FORMATS = (
    LogFormat(
        name="nemo",
        description="NeMo 2 `Training epoch e, iteration i/n | ... | train_step_timing in s: t | ...` lines",
        signature=InOrder((r"\bTraining epoch \d+, iteration \d+/\d+ \|", r"\btrain_step_timing in s: ")),
        clue=("train_step_timing in s: ",),
        read=each_line(ITERATION.search, _point, "Training epoch"),
        warmup=11,
        window=34,
        printed_from="seconds",
        unit="sequences/s",
        practice="NVIDIA DGX Cloud benchmarking recipes (parse_train_timing.sh): iterations 11-44; sequences/s = "
        "global_batch_size / train_step_timing",
    ),
)
