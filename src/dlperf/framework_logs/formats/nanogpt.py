"""nanoGPT's `train.py` (karpathy/nanoGPT) lines, printed by the master process:

tokens per iteration will be: 12,288
step 20: train loss 4.1880, val loss 4.1941
iter 20: loss 4.2028, time 953.06ms, mfu 0.00%

`time` is one iteration (every gradient-accumulation micro step, so the whole global batch) from the end of the
one before, printed every `log_interval` iterations; `tokens per iteration` is global (accumulation steps x
processes x batch x block size). An iteration right after an evaluation (`step N: train loss ...`) holds the
evaluation in its time, so it is left out. Rule: nanoGPT's own MFU estimate skips the first 5 iterations; tokens
over time of the logged iterations after them. In an instrumented run the hook's figure over the very iterations
the reader kept (iteration k's time is the hook's step k to k+1: its step 1 is iteration 0) is compared with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import NUMBER, HookTrace, LogFormat, Point, RunShape, hook_over_steps, loss, to_float

TOKENS = re.compile(r"tokens per iteration will be: ([\d,]+)")
EVAL = re.compile(r"^step (\d+): train loss")
LINE = re.compile(rf"^iter (?P<iter>\d+): loss (?P<loss>{NUMBER}|nan), time (?P<ms>{NUMBER})ms")
AFTER_EVAL = "an iteration right after an evaluation holds it in its time: left out"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    tokens, evaluated = None, None
    for line in lines:
        if line.startswith("tokens per iteration") and (t := TOKENS.search(line)):
            tokens = int(t[1].replace(",", ""))
        elif line.startswith("step ") and (e := EVAL.match(line)):
            evaluated = int(e[1])
        elif line.startswith("iter ") and (m := LINE.match(line)):
            yield _point(m, tokens, evaluated)


def _point(m: re.Match[str], tokens: int | None, evaluated: int | None) -> Point:
    """An `iter` line's point; the iteration right after an evaluation carries no time of its own."""
    if tokens is None:
        raise DataError("no `tokens per iteration will be:` line before the first iteration: its work is unknown")
    step = int(m["iter"])
    if step == evaluated:
        return Point(step=step, note=AFTER_EVAL)
    seconds = to_float(m["ms"]) / 1000
    return Point(step=step, seconds=seconds, batch=tokens, speed=tokens / seconds if seconds > 0 else None,
                 resolution=0.000005, metrics=loss(m["loss"]))  # fmt: skip


def same_stretch(
    trace: HookTrace, points: list[Point], kept: tuple[int, int] | None
) -> tuple[float, float, str] | None:
    """The hook's intervals of the iterations the reader kept (those with a time of their own, in its window)."""
    found = hook_over_steps(trace, points, kept, lambda p: (p.step, p.step + 1))  # type: ignore[operator]
    if found is None or kept is None:
        return None
    return found[0], found[1], f"the {found[2]} iterations {kept[0]}-{kept[1]} nanoGPT timed (not the evaluated ones)"


FORMATS = (
    LogFormat(
        name="nanogpt",
        description="nanoGPT train.py `iter N: loss X, time Yms, mfu Z%` with its `tokens per iteration` line",
        # the tokens line comes first, and the reader needs it
        signature=re.compile(
            rf"^tokens per iteration will be: [\d,]+$|^iter \d+: loss (?:{NUMBER}|nan), time {NUMBER}ms, mfu"
        ),
        clue=("tokens per iteration will be: ", ": loss "),
        reads=(": train loss",),
        read=read,
        warmup=5,
        printed_from="seconds",
        unit="tokens/s",
        practice="nanoGPT: iterations after the first 5 (as its MFU estimate), tokens per iteration / their time, "
        "the iterations right after an evaluation left out",
        same_stretch=same_stretch,
    ),
)
