"""Lightning 2.x's default progress bar (RichProgressBar, where `rich` is installed). Into a pipe Rich draws only
the finished bar, one line per bar:

Epoch 0/-2 ━━━━━━━━━━━━━━━━━━━━━━━━ 60/60 0:00:15 • 0:00:00 3.92it/s loss: 2.290

(where its metrics are wide, Rich wraps the row at 80 columns: the remaining time and the metrics' rest go to the
lines below, `... 1200/1200 0:01:35 •       15.52it/s loss: 2.311`).

The `it/s` is Rich's `Task.speed`: the steps completed after the bar's first update over the time since it, within
the last 30 s (rich/progress.py `speed_estimate_period`): samples over time, the bar's first step left out. Rule:
the last bar's figure x the case's global batch (Lightning's batches are per process). In an instrumented run the
hook's figure over the same stretch (the last epoch's steps after its first, within the last 30 s; the hook marks
each epoch's start, where Lightning's bar starts again) is compared with it, like for like.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, HookTrace, LogFormat, Point, RunShape, StepCounter, to_float

# The remaining time may be missing from the line: where the bar's metrics are wide, Rich wraps its row in an
# 80-column pipe and the `0:00:00` after `•` goes to the next line.
LINE = re.compile(rf"Epoch (?P<epoch>\d+)/-?\d+ ━+ (?P<n>\d+)/\S+ \d+:\d\d:\d\d •(?: \S+)? +(?P<rate>{NUMBER})it/s")
SPEED_PERIOD_S = 30.0  # rich.progress.Progress(speed_estimate_period=30.0): older samples are dropped
NOTE = "Rich's it/s: steps after the bar's first over the time since (its last 30 s) x the global batch"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    steps = StepCounter()
    for line in lines:
        m = LINE.search(line) if "it/s" in line else None
        if m is None:
            continue
        rate = to_float(m["rate"])
        seconds = 1 / rate if rate > 0 else float("inf")
        # the rate is printed to 0.01 it/s: a time per step known to +-0.005 / rate^2
        yield Point(step=steps(int(m["epoch"]), int(m["n"])), seconds=seconds,
                    resolution=0.005 / rate**2 if rate > 0 else None, note=NOTE)  # fmt: skip


def same_stretch(
    trace: HookTrace, _points: list[Point], _kept: tuple[int, int] | None
) -> tuple[float, None, str] | None:
    """Rich's `Task.speed` (rich/progress.py) over the hook's stamps: the samples of the last epoch's steps after
    the first kept one, over the time from it to the last, those older than SPEED_PERIOD_S before the last dropped
    (`Progress.update` prunes them)."""
    start = trace.epochs[-1] if trace.epochs else float("-inf")
    steps = sorted(step for step, t in trace.times.items() if t > start)
    if len(steps) < 2:
        return None
    end = trace.times[steps[-1]]
    kept = [step for step in steps if trace.times[step] >= end - SPEED_PERIOD_S]
    if len(kept) < 2:
        return None
    what = f"Rich's span: the last epoch's steps {kept[0]}-{kept[-1]}, after the first, within its last 30 s"
    return sum(trace.samples[step] for step in kept[1:]) / (end - trace.times[kept[0]]), None, what


FORMATS = (
    LogFormat(
        name="lightning-rich",
        description="Lightning's Rich progress bar (`Epoch 0/... ━━━ 60/60 0:00:15 • 0:00:00 3.92it/s`) x the "
        "global batch",
        signature=re.compile(r"Epoch \d+/-?\d+ ━+ \d+/\S+ \d+:\d\d:\d\d •(?: \S+)? +[\d.]+it/s"),
        clue=("it/s",),
        read=read,
        warmup=0,
        last_only=True,
        printed_from="seconds",
        practice="Rich's Task.speed of the last bar (its first step left out, its last 30 s) x the global batch",
        same_stretch=same_stretch,
    ),
)
