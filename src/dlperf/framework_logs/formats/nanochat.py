"""nanochat's `scripts/base_train.py` (karpathy/nanochat) lines, printed by rank 0:

Total batch size 524,288 => gradient accumulation steps: 1
step 00011/21400 (0.05%) | loss: 7.101234 | lrm: 1.00 | dt: 1012.47ms | tok/sec: 517,835 | bf16_mfu: 48.21 | ...

What the figures are (base_train.py's training loop, 92d63d4e): `dt` is one whole optimizer step, every
gradient-accumulation micro step of the global `total_batch_size` tokens, from a synchronise before it to one
after it; `tok/sec` = `int(total_batch_size / dt)` (the first versions, October 2025, divided one micro step's
tokens instead). nanochat's own `total time` counts the steps after the first 10 ("only count the time after the
first 10 steps"). Rule: nanochat's own, the steps after step 10; the `Total batch size` tokens of each kept step
over their summed dt (tokens/s), or, where the log lacks that line, the printed tok/sec x dt, said so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, loss, to_float

TOTAL = re.compile(r"^Total batch size ([\d,]+) => gradient accumulation steps: \d+")
LINE = re.compile(
    rf"^step (?P<step>\d+)(?:/(?P<steps>\d+))? \(.*?\) \| loss: (?P<loss>{NUMBER}|nan) \|.*? \| dt: (?P<ms>{NUMBER})ms"
    rf" \| tok/sec: (?P<tps>[\d,]+) \|"
)
FROM_RATE = "tokens per step: the printed tok/sec x dt (the log has no `Total batch size` line)"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    tokens: float | None = None
    for line in lines:
        if line.startswith("Total batch size") and (t := TOTAL.match(line)):
            tokens = to_float(t[1])
        elif line.startswith("step ") and (m := LINE.match(line)):
            seconds = to_float(m["ms"]) / 1000
            yield Point(step=int(m["step"]), seconds=seconds, batch=tokens or to_float(m["tps"]) * seconds,
                        run=m["steps"], resolution=0.000005, note=None if tokens else FROM_RATE,
                        metrics=loss(m["loss"]))  # fmt: skip


FORMATS = (
    LogFormat(
        name="nanochat",
        description="nanochat base_train.py `step N/M (p%) | loss: ... | dt: Tms | tok/sec: R | ...` with its "
        "`Total batch size` line",
        signature=re.compile(
            r"^Total batch size [\d,]+ => gradient accumulation steps: \d+"
            rf"|^step \d+(?:/\d+)? \(.*?\) \| loss: .*? \| dt: {NUMBER}ms \| tok/sec: [\d,]+ \|"
        ),
        clue=("Total batch size ", " | tok/sec: "),
        read=read,
        warmup=10,
        printed_from="seconds",
        unit="tokens/s",
        practice="nanochat base_train.py: the steps after the first 10, total_batch_size tokens over their dt",
    ),
)
