"""A tqdm progress bar, for a script that prints nothing else a reader knows (Lightning's TQDM bar, a plain loop
wrapped in tqdm; a bar beside a framework's own lines is left to that framework's reader):

Epoch 0:  98%|█████████▊| 59/60 [00:05<00:00, 10.82it/s, loss=2.270]

A bar's count is of iterations (each the case's global batch); its `[elapsed<remaining, rate]` clock is whole
seconds. tqdm's rate is an exponential moving average unless the bar is made with `smoothing=0` (Lightning's
is), and then it is count / elapsed: where the rate and the clock agree on that, count / rate is the bar's time to
the hundredth of the rate, else the clock's second (+-0.5 s). Bars one after another (an epoch each) are laid end
to end: the time between them (an epoch's end) is not counted; evaluation bars (`Validation ...`, `Sanity
Checking`, `Testing`) are not training and are skipped, while a training bar's own clock runs on through them. A
figure the clock's rounding leaves unknown to 2 % is refused (measure.PRECISION): a short run needs dlperf run's
instrumentation.

Rule: the first 5 iterations skipped; samples (iterations x the global batch) over the bars' time after them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.peers.base import PeerFormat, Point, RunShape

BAR = re.compile(
    r"^(?P<desc>.*?)(?:\d+%)?\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\S+) \[(?P<clock>(?:\d+:)?\d+:\d\d)<[^,\]]*,\s*"
    r"(?P<rate>[\d.]+|\?)(?P<unit>it/s|s/it)"
)


def _clock(text: str) -> int:
    seconds = 0
    for part in text.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def bar_time(n: int, clock: int, rate: str, unit: str) -> tuple[float, float]:
    """(seconds since the bar started, how far off it can be): count / rate where they agree with the clock."""
    if rate != "?" and float(rate) > 0 and n > 0:
        value = float(rate)
        seconds, off = (n / value, n * 0.005 / value**2) if unit == "it/s" else (n * value, n * 0.005)
        if clock - 0.01 <= seconds < clock + 1.01:
            return seconds, off
    return clock + 0.5, 0.5


# bars of evaluation, not training (Lightning's `Validation DataLoader 0`, `Sanity Checking`, `Testing`, ...)
EVALUATION = ("val", "test", "predict", "sanity", "eval")


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    offset_steps, offset_time, desc, last_n, last_time = 0, 0.0, None, 0, 0.0
    for line in lines:
        m = BAR.search(line) if ("it/s" in line or "s/it" in line) else None
        if m is None or m["desc"].strip().lower().startswith(EVALUATION):
            continue
        n, name = int(m["n"]), m["desc"].strip()
        if name != desc or n < last_n:  # a new training bar (an epoch): laid after the one before
            offset_steps, offset_time, desc = offset_steps + last_n, offset_time + last_time, name
        seconds, off = bar_time(n, _clock(m["clock"]), m["rate"], m["unit"])
        last_n, last_time = n, seconds
        step = offset_steps + n
        yield Point(step=step, timestamp=offset_time + seconds, samples=step * shape.global_batch, resolution=off)


FORMATS = (
    PeerFormat(
        name="tqdm",
        description="a tqdm bar alone (`59/60 [00:05<00:00, 10.82it/s]`): iterations x the global batch over the "
        "bar's own time",
        signature=re.compile(r"\|\s*\d+/\S+ \[(?:\d+:)?\d+:\d\d<[^,\]]*,\s*[\d.]+(?:it/s|s/it)"),
        read=read,
        rules=("timestamp",),
        warmup=5,
        window=None,
        unit="samples/s",
        fallback=True,
        practice="tqdm: samples over the bars' own time (count / rate where the rate is count / elapsed, else "
        "the whole-second clock) after the first 5 iterations",
    ),
)
