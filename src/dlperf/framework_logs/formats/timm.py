"""timm's `train.py` (pytorch-image-models) training lines, printed every `--log-interval` updates by rank 0:

Train: 1 [  14/16 ( 94%)]  Loss: 0.721 (0.719)  Time: 0.324s,   24.71/s  (0.565s,   14.17/s)  LR: 1.563e-03  ...

`Time: V s, R/s` is the last optimizer update alone (its global samples / its time, gradient accumulation and
every process included); `(A s, R'/s)` is the mean update time of the epoch so far (an AverageMeter from its first
update). A mean of the printed rates is no speed (rates combine as samples over time), and the lone `V` samples
one update in `--log-interval`; so the running mean is turned back into time: updates so far x A is the epoch's
time to this line, and the time between two lines over the updates between them is each interval's step time,
weighted by its updates. Samples per update = R x V (global). A time the 3-decimal rounding leaves unknown to 2 %
is refused.

Rule: the first 5 updates (compilation, start-up) skipped; samples over time of every later update. In an
instrumented run the hook's figure over the same updates (each kept interval's, the hook's steps being updates)
is compared with it; a later epoch's first interval is left out of both (`paused`: timm's clock starts again at
the epoch's start, after validation and saving, which the hook's stamps hold).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import (
    NUMBER,
    HookTrace,
    InOrder,
    LogFormat,
    Point,
    RunShape,
    hook_over_steps,
    search_at_first,
    to_float,
)

UPDATE = re.compile(r"Train: (?P<epoch>\d+) \[\s*(?P<update>\d+)/(?P<updates>\d+) ")  # where LINE is tried
LINE = re.compile(
    rf"{UPDATE.pattern}.*?Time: (?P<time>{NUMBER})s,\s*(?P<rate>{NUMBER})/s"
    rf"\s+\((?P<avg>{NUMBER})s,\s*{NUMBER}/s\)"
)
HALF_STEP = 0.0005  # the seconds are printed to 3 decimals


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    offset, epoch, done, elapsed = 0, None, 0, 0.0  # updates before this epoch; this epoch's updates and time
    for line in lines:
        m = search_at_first(LINE, UPDATE, line) if "Train:" in line else None
        if m is None:
            continue
        paused = False
        if m["epoch"] != epoch or int(m["update"]) + 1 <= done:  # a new epoch: its meters start again
            paused = epoch is not None  # its clock starts after the last epoch's validation and saving
            offset, epoch, done, elapsed = offset + done, m["epoch"], 0, 0.0
        updates = int(m["update"]) + 1
        total = to_float(m["avg"]) * updates  # the epoch's update time so far
        samples = round(to_float(m["rate"]) * to_float(m["time"])) or shape.global_batch
        seconds = (total - elapsed) / (updates - done)
        yield Point(
            step=offset + updates,
            start=offset + done,
            seconds=seconds,
            speed=samples / seconds if seconds > 0 else None,
            resolution=HALF_STEP * (updates + done) / (updates - done),
            paused=paused,
        )
        done, elapsed = updates, total


def same_stretch(
    trace: HookTrace, points: list[Point], kept: tuple[int, int] | None
) -> tuple[float, float, str] | None:
    """The hook's time of the updates of every kept interval (start, step]."""
    found = hook_over_steps(trace, points, kept, lambda p: (p.start, p.step))  # type: ignore[return-value,arg-type]
    if found is None or kept is None:
        return None
    return found[0], found[1], f"timm's {found[2]} kept intervals to update {kept[1]} (not a later epoch's first)"


FORMATS = (
    LogFormat(
        name="timm",
        description="timm train.py `Train: e [i/n ...] ... Time: Vs, R/s (As, R'/s)`: the running mean update time "
        "turned back into each interval's",
        signature=InOrder((r"Train: \d+ \[\s*\d+/\d+ ", rf"Time: {NUMBER}s,\s*{NUMBER}/s\s+\({NUMBER}s,")),
        clue=("Train: ",),
        read=read,
        warmup=5,
        printed_from="seconds",
        unit="images/s",
        practice="timm train.py: the epoch's running mean update time x updates = its time so far; samples over "
        "time of the updates after the first 5",
        same_stretch=same_stretch,
    ),
)
