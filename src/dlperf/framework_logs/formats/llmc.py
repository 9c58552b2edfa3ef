"""llm.c's `train_gpt2.cu` (karpathy/llm.c) lines, printed by process 0:

batch_size B=16 * seq_len T=1024 * num_processes=8 and total_batch_size=1048576
step    2/32000 | loss 10.539388 (+nanz)| norm 43.5996 (+nanz)| lr 1.71e-06 | 2747.19 ms | 47.4% bf16 MFU | 381690 tok/s

What the figures are (train_gpt2.cu's training loop, `printf0("step %4d/%d | loss ... | %.2f ms | %.1f%% bf16 MFU |
%.0f tok/s\n", step + 1, ...)`): the ms are the whole step, every gradient-accumulation micro step of the global
`total_batch_size` tokens, timed by CUDA events around it; `tok/s` is not that step's own rate but
`bias_corrected_ema_tokens_per_second`, an exponential moving average (0.95) of the steps' rates after the first,
bias-corrected as AdamW's moments are ("consider the first batch to be a warmup (e.g. cuBLAS/cuDNN
initialisation)"). Its end line, `total average iteration time: X ms`, averages every step but the first.
Rule: llm.c's own, steps after the first; the `total_batch_size` tokens of each kept step over their summed time
(tokens/s). The last printed EMA is kept as the framework's own reading beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, loss, to_float

TOTAL = re.compile(r"\band total_batch_size=(\d+)")
LINE = re.compile(
    rf"^step\s+(?P<step>\d+)/(?P<steps>\d+) \| loss (?P<loss>{NUMBER}|nan|-?inf) \(.*?\| (?P<ms>{NUMBER}) ms \|"
    rf".*?\| (?P<tps>{NUMBER}) tok/s\s*$"
)


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    tokens: int | None = None
    for line in lines:
        if tokens is None and "total_batch_size=" in line and (t := TOTAL.search(line)):
            tokens = int(t[1])
        elif line.startswith("step") and (m := LINE.match(line)):
            yield _point(m, tokens)


def _point(m: re.Match[str], tokens: int | None) -> Point:
    """A step line's point: the global batch's tokens over the step's own time; its EMA as the own reading."""
    if tokens is None:
        raise DataError("no `total_batch_size=` line before the first step: the tokens of a step are unknown")
    seconds = to_float(m["ms"]) / 1000
    return Point(step=int(m["step"]), seconds=seconds, batch=tokens, run=int(m["steps"]), resolution=0.000005,
                 own=to_float(m["tps"]), metrics=loss(m["loss"]))  # fmt: skip


FORMATS = (
    LogFormat(
        name="llmc",
        description="llm.c train_gpt2.cu `step N/M | loss ... | X ms | Y% bf16 MFU | Z tok/s` with its "
        "`total_batch_size=` line",
        # the batch line comes first, and the reader needs it
        signature=re.compile(
            r"^batch_size B=\d+ \* seq_len T=\d+ \* num_processes=\d+ and total_batch_size=\d+"
            r"|^step\s+\d+/\d+ \| loss .*\| [\d.]+ ms \|.*\| [\d.]+ tok/s\s*$"
        ),
        clue=(" tok/s", "total_batch_size="),
        read=read,
        rules=("printed",),
        warmup=1,
        window=None,
        printed_from="seconds",
        unit="tokens/s",
        own_reading="llm.c's printed tok/s at the last kept step (an EMA of the steps' rates after the first)",
        practice="llm.c train_gpt2.cu: the first step is warm-up; total_batch_size tokens per step over the kept "
        "steps' ms",
    ),
)
