"""A tqdm progress bar, for a script that prints nothing else a reader knows (Lightning's TQDM bar, a plain loop
wrapped in tqdm; a bar beside a framework's own lines is left to that framework's reader):

Epoch 0:  98%|█████████▊| 59/60 [00:05<00:00, 10.82it/s, loss=2.270]

A bar's count is of iterations (each the case's global batch); its `[elapsed<remaining, rate]` clock is whole
seconds. tqdm's rate is an exponential moving average unless the bar is made with `smoothing=0` (Lightning's
is), and then it is count / elapsed: where the rate and the clock agree on that, the bar's time lies where both
put it (count / rate, or count x rate for a slow bar's `s/it`, to the hundredth of the rate, within the clock's
second), else the clock's second (+-0.5 s). Bars one after another (an epoch each) are laid end
to end: the time between them (an epoch's end) is not counted; evaluation bars (`Validation ...`, `Sanity
Checking`, `Testing`) are not training and are skipped, while a training bar's own clock runs on through them. A
figure the clock's rounding leaves unknown to 2 % is refused (rules.PRECISION): a short run needs dlperf run's
instrumentation.

Rule: the first 5 iterations skipped; samples (iterations x the global batch) over the bars' time after them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import LogFormat, Point, RunShape

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
    """(seconds since the bar started, how far off it can be). The clock is the elapsed time cut to whole seconds
    (tqdm's format_interval: [clock, clock + 1)); with smoothing 0 the rate is n / elapsed, printed to 2 decimals,
    so n / rate (it/s) or n x rate (s/it) holds the elapsed time within the rate's rounding. Where the two agree
    the elapsed time lies in both: their overlap's middle, to half its width (a slow bar's `4.14s/it` at n = 18 is
    known to 0.1 %, a long one's count x rate no better than its clock); where they do not (a smoothed rate) the
    clock alone."""
    low, high = float(clock), clock + 1.0
    if rate != "?" and float(rate) > 0 and n > 0:
        value = float(rate)
        seconds, off = (n / value, n * 0.005 / value**2) if unit == "it/s" else (n * value, n * 0.005)
        if seconds - off < high + 0.01 and seconds + off > low - 0.01:  # rounding of both: they agree
            low, high = max(low, seconds - off), min(high, seconds + off)
            if high < low:
                low = high = seconds
    return (low + high) / 2, (high - low) / 2


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
        yield Point(step=step, timestamp=offset_time + seconds, resolution=off)  # x the global batch given


FORMATS = (
    LogFormat(
        name="tqdm",
        description="a tqdm bar alone (`59/60 [00:05<00:00, 10.82it/s]`): iterations x the global batch over the "
        "bar's own time",
        signature=re.compile(r"\|\s*\d+/\S+ \[(?:\d+:)?\d+:\d\d<[^,\]]*,\s*[\d.]+(?:it/s|s/it)"),
        clue=("it/s", "s/it"),
        read=read,
        rules=("timestamp",),
        warmup=5,
        fallback=True,
        practice="tqdm: samples over the bars' own time (count / rate where the rate is count / elapsed, else "
        "the whole-second clock) after the first 5 iterations",
    ),
)
