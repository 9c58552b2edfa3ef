"""LitGPT's (and lit-gpt's) iteration lines, pretraining and fine-tuning alike:

Epoch 1 | iter 4 step 2 | loss train: 1.597, val: n/a | iter time: 595.27 ms (step)          (LitGPT, 2024-)
iter 1760 | step 220: loss 1.5947, iter time: 263.85 ms (optimizer.step)                       (early 2024)
iter 77 step 39: loss 10.8259, iter time: 214.40ms (optimizer.step)                            (lit-gpt, 2023)

What the figure is (litgpt/pretrain.py `fit` and litgpt/finetune/lora.py `fit`, Lightning-AI/litgpt 26857050):
an iteration is one micro-batch on every device (`train.micro_batch_size` samples each, `gradient_accumulation_iters`
of them to an optimizer step, the `(step)` iterations); `iter time` is the logged iteration alone, `t1 - iter_t0`
from its start to its loss's synchronising `.item()`, printed every `log_interval` iterations (in ms, 2 decimals).

Rule (the seeds' method): the first 5 iterations skipped; the samples of the logged iterations after them over
their summed `iter time`; an iteration's samples are the micro-batch x devices: the printed config's
`micro_batch_size` where the log holds it (`TrainArgs(... micro_batch_size=4 ...)`, or lit-gpt's hyperparameter
dict), else the path's batch per device. The record says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, InOrder, LogFormat, Point, RunShape, to_float

LINE = re.compile(
    rf"\biter\s+(?P<iter>\d+)(?: \|)? step\s+(?P<step>\d+)(?::| \|) "
    rf".*?\biter time: (?P<time>{NUMBER}) ?(?P<unit>ms|s)\b"
)
LOSS = re.compile(rf"\bloss(?: train)?:? ({NUMBER})")
MICRO = re.compile(r"(?:'micro_batch_size': |\bmicro_batch_size=)(\d+)")
SECONDS = {"ms": 1e-3, "s": 1.0}
PRINTED_MICRO = "samples per iteration: the printed micro_batch_size x devices"
PATH_MICRO = "samples per iteration: the path's batch per device (LitGPT's micro_batch_size) x devices"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    micro = None
    for line in lines:
        if "iter time:" not in line:
            if micro is None and "micro_batch_size" in line and (m := MICRO.search(line)):
                micro = int(m[1])
            continue
        if (m := LINE.search(line)) is None:
            continue
        unit = SECONDS[m["unit"]]
        loss = LOSS.search(line)
        batch = micro * shape.world_size if micro else shape.global_batch
        yield Point(
            step=int(m["iter"]),
            seconds=to_float(m["time"]) * unit,
            batch=batch,
            resolution=0.005 * unit,
            note=PRINTED_MICRO if micro else PATH_MICRO,
            metrics=(("loss", to_float(loss[1])),) if loss else (),
        )


FORMATS = (
    LogFormat(
        name="litgpt",
        description="LitGPT `Epoch E | iter N step S | loss train: ... | iter time: T ms` (and lit-gpt's `iter N step "
        "S: loss ..., iter time: Tms`) lines, with the printed micro_batch_size where the log holds it",
        # the config comes first, and the reader takes the micro-batch from it
        signature=InOrder(
            (r"\biter\s+\d+(?: \|)? step\s+\d+(?::| \|) ", rf"\biter time: {NUMBER} ?(?:ms|s)\b"),
            (r"'train': TrainArgs\(",),
            (r"^\{'model_name': ", r"'micro_batch_size': \d+"),
        ),
        clue=("iter time: ", "'train': TrainArgs(", "'micro_batch_size': "),
        reads=("micro_batch_size=",),
        read=read,
        warmup=5,
        printed_from="seconds",
        practice="litgpt pretrain.py/finetune fit(): the logged iterations after the first 5, micro-batch x devices "
        "over their summed iter time",
    ),
)
