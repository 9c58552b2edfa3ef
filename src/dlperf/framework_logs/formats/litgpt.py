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

The run's summary (pretrain.py `setup` since v0.5.4, Lightning-AI/litgpt#1805; the fine-tuning scripts' report,
utils.py `create_finetuning_performance_report`):

| - Total tokens  : 999,424                     (fine-tuning: `| - Total Tokens (w/ Padding) :   2674`)
| - Training Time : 48.30 s

`Training Time` runs from before `fit` to after the final checkpoint's save (compilation, evaluation and saving in
it); pretraining's total tokens are `iter_num x micro_batch_size x max_seq_length x world size`, every iteration's
planned tokens (those before a resume too). That whole-run figure, tokens over the time, is the record's only where
no window of iteration lines gives one, said so. Pretraining's printed `Tok/sec` divides by `train_time`, the
`time.perf_counter()` reading at the start, not the elapsed time (60.93 in #1805's own example of 999,424 tokens in
48.30 s): it is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, InOrder, LogFormat, Point, RunShape, metrics_in, to_float

LINE = re.compile(
    rf"\biter\s+(?P<iter>\d+)(?: \|)? step\s+(?P<step>\d+)(?::| \|) "
    rf".*?\biter time: (?P<time>{NUMBER}) ?(?P<unit>ms|s)\b"
)
LOSS = {"loss": re.compile(rf"\bloss(?: train)?:? ({NUMBER})")}
MICRO = re.compile(r"(?:'micro_batch_size': |\bmicro_batch_size=)(\d+)")
SECONDS = {"ms": 1e-3, "s": 1.0}
TOTAL = re.compile(r"^\| - Total [Tt]okens(?: \(w/ Padding\))?\s*:\s*([\d,]+)\s*$")
TIME = re.compile(rf"^\| - Training Time\s*:\s*({NUMBER}) s\s*$")
SUMMARY = (
    "LitGPT's summary: its total tokens over its Training Time (the whole run, compilation, evaluation and saving "
    "included; its printed pretraining Tok/sec divides by a clock reading, not the elapsed time, and is not read)"
)
PRINTED_MICRO = "samples per iteration: the printed micro_batch_size x devices"
PATH_MICRO = "samples per iteration: the path's batch per device (LitGPT's micro_batch_size) x devices"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    micro: int | None = None
    tokens: list[int] = []  # the summary's token count, once its line is read
    for line in lines:
        if line.startswith("| - "):
            yield from _summary(line, tokens)
        elif "iter time:" not in line:
            if micro is None and "micro_batch_size" in line and (m := MICRO.search(line)):
                micro = int(m[1])
        elif (m := LINE.search(line)) is not None:
            yield _point(m, micro, shape)


def _point(m: re.Match[str], micro: int | None, shape: RunShape) -> Point:
    """An iteration line's point: one micro-batch on every device over its iter time."""
    unit = SECONDS[m["unit"]]
    return Point(step=int(m["iter"]), seconds=to_float(m["time"]) * unit,
                 batch=micro * shape.world_size if micro else shape.global_batch, resolution=0.005 * unit,
                 note=PRINTED_MICRO if micro else PATH_MICRO,
                 metrics=metrics_in(m.string, LOSS))  # fmt: skip


def _summary(line: str, tokens: list[int]) -> Iterator[Point]:
    """The summary's whole-run figure at its Training Time line, its tokens from the line before."""
    if m := TOTAL.match(line):
        tokens[:] = [int(m[1].replace(",", ""))]
    elif tokens and (t := TIME.match(line)) and to_float(t[1]) > 0:
        yield Point(step=None, speed=tokens[0] / to_float(t[1]), whole_run=True, unit="tokens/s", note=SUMMARY)


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
            (TOTAL.pattern,),  # the summary's tokens come first, and the reader needs them
        ),
        clue=("iter time: ", "'train': TrainArgs(", "'micro_batch_size': ", "| - Total "),
        reads=("micro_batch_size=", "| - Training Time"),
        read=read,
        warmup=5,
        printed_from="seconds",
        practice="litgpt pretrain.py/finetune fit(): the logged iterations after the first 5, micro-batch x devices "
        "over their summed iter time",
    ),
)
