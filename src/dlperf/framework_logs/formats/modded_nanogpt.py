"""modded-nanogpt's (KellerJordan/modded-nanogpt) training logs: its code printed first (`print0(code)`), then rank 0's

step:1200/1390 train_time:68123ms step_avg:56.77ms
step:1200/3242 train_loss:3.6712 train_time:342911ms step_avg:288.16ms          (2024)

What the figures are (train_gpt.py's loop, records/track_1_short/*): `train_time` is the training clock in whole ms,
stopped around each validation (`training_time_ms` summed from `t0` between them); `step_avg` is it over the steps
it timed: until January 2025 the clock restarts at step 10 ("ignores timing first 10 steps, which are slower"), so
`step_avg` is train_time / (step - 10), later it is train_time / step. The tokens of a step are in the printed
code: `batch_size : int = 8*64 # batch size, in sequences, across all devices` x `sequence_length : int = 1024`
(2024), `batch_size = 8*64*1024 # batch size in tokens` (January 2025), `train_seq_len = 48*1024` per rank with
`assert world_size == 8` (spring 2025), `train_batch_size: int = 2048 * 16 * 8` (May-November 2025). From December
2025 the batch follows a schedule (`get_bs`, `TrainingStage`): no one figure per step, refused.

Rule: modded-nanogpt's own practice, the steps after step 11 (after the 2024 clock's restart): the tokens of the
kept steps over their training clock, the difference of `train_time` between the window's ends (to a ms at each
end); the last `step_avg` as a rate is kept as the framework's own reading.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import NUMBER, LogFormat, Point, RunShape, to_float

LINE = re.compile(
    rf"^step:(?P<step>\d+)/(?P<steps>\d+) (?:train_loss:\S+ )?train_time:(?P<ms>\d+)ms step_avg:(?P<avg>{NUMBER}|nan)ms"
)
PRODUCT = r"(\d+(?:\s*\*\s*\d+)*)"
PRODUCTS = {  # a line of the printed code -> the name of its product
    "sequences": re.compile(rf"^\s*batch_size : int = {PRODUCT} # batch size, in sequences, across all devices"),
    "length": re.compile(rf"^\s*sequence_length : int = {PRODUCT} # sequence length, in tokens"),
    "tokens": re.compile(rf"^\s*(?:batch_size = {PRODUCT} # batch size in tokens|train_batch_size: int = {PRODUCT})"),
    "rank": re.compile(rf"^\s*train_seq_len = {PRODUCT} # FlexAttention sequence length"),
}
FLAGS = {
    "eight": re.compile(r"^assert world_size == 8\b"),
    "schedule": re.compile(r"^def get_bs\(|^\s*TrainingStage\("),
}


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    declared: dict[str, int] = {}
    tokens: int | None = None
    for line in lines:
        if line.startswith("step:") and (m := LINE.match(line)):
            tokens = tokens or _tokens(declared)
            step, avg = int(m["step"]), m["avg"]
            yield Point(step=step, run=int(m["steps"]), timestamp=int(m["ms"]) / 1000, samples=step * tokens,
                        resolution=0.0005, own=_rate(tokens, avg))  # fmt: skip
        elif tokens is None:
            _declare(line, declared)


def _rate(tokens: int, step_avg: str) -> float | None:
    """The tokens per second a printed step_avg (ms) makes; None where it is `nan` (2024's first 11 steps)."""
    return tokens / to_float(step_avg) * 1000 if step_avg != "nan" and to_float(step_avg) > 0 else None


def _declare(line: str, declared: dict[str, int]) -> None:
    """What a line of the printed code declares about a step's tokens."""
    for name, pattern in PRODUCTS.items():
        if m := pattern.match(line):
            declared[name] = math.prod(int(part) for part in next(g for g in m.groups() if g).split("*"))
    declared.update((name, 1) for name, pattern in FLAGS.items() if pattern.match(line))


def _tokens(declared: dict[str, int]) -> int:
    """The tokens of one step as the printed code declares them."""
    if "schedule" in declared:
        raise DataError("its printed code schedules the batch size (get_bs, TrainingStage): a step's tokens vary")
    if "tokens" in declared:
        return declared["tokens"]
    if "sequences" in declared and "length" in declared:
        return declared["sequences"] * declared["length"]
    if "rank" in declared and "eight" in declared:
        return declared["rank"] * 8
    raise DataError("no batch in its printed code (batch_size, train_batch_size or train_seq_len): a step's tokens "
                    "are unknown")  # fmt: skip


FORMATS = (
    LogFormat(
        name="modded-nanogpt",
        description="modded-nanogpt `step:N/M train_time:Tms step_avg:Ams` lines, a step's tokens from its printed "
        "code",
        # the printed code comes first, and the reader takes a step's tokens from it
        signature=re.compile("|".join(p.pattern for p in (LINE, *PRODUCTS.values(), *FLAGS.values()))),
        clue=(
            "step_avg:",
            "batch_size",
            "sequence_length :",
            "train_seq_len =",
            "TrainingStage(",
            "def get_bs(",
            "assert world_size",
        ),  # fmt: skip
        read=read,
        rules=("timestamp",),
        warmup=11,
        unit="tokens/s",
        own_reading="modded-nanogpt's step_avg at the last kept step (its clock's mean step)",
        practice="modded-nanogpt train_gpt.py: the training clock (validation left out) after step 11, a step's "
        "tokens from the printed code",
    ),
)
