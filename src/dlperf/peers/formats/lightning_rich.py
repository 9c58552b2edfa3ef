"""Lightning 2.x's default progress bar (RichProgressBar, where `rich` is installed). Into a pipe Rich draws only
the finished bar, one line per bar:

Epoch 0/-2 ━━━━━━━━━━━━━━━━━━━━━━━━ 60/60 0:00:15 • 0:00:00 3.92it/s loss: 2.290

The `it/s` is Rich's `Task.speed`: the steps completed after the bar's first update over the time since it, within
the last 30 s (rich/progress.py `speed_estimate_period`): samples over time, the bar's first step left out. Rule:
the last bar's figure x the case's global batch (Lightning's batches are per process).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import NUMBER, PeerFormat, Point, RunShape, StepCounter, to_float

LINE = re.compile(rf"Epoch (?P<epoch>\d+)/-?\d+ ━+ (?P<n>\d+)/\S+ \d+:\d\d:\d\d • \S+ (?P<rate>{NUMBER})it/s")
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


FORMATS = (
    PeerFormat(
        name="lightning-rich",
        description="Lightning's Rich progress bar (`Epoch 0/... ━━━ 60/60 0:00:15 • 0:00:00 3.92it/s`) x the "
        "global batch",
        signature=re.compile(r"Epoch \d+/-?\d+ ━+ \d+/\S+ \d+:\d\d:\d\d • \S+ [\d.]+it/s"),
        read=read,
        rules=("printed",),
        warmup=0,
        window=None,
        last_only=True,
        printed_from="seconds",
        unit="samples/s",
        practice="Rich's Task.speed of the last bar (its first step left out, its last 30 s) x the global batch",
    ),
)
