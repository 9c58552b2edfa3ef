"""TensorFlow 2 Keras `TimeHistory` callback (tensorflow/models `classifier_trainer.py`), with glog prefixes:

I0826 15:13:29.256277 140405777909504 keras_utils.py:133] TimeHistory: 39.13 seconds, 327.08
examples/second between steps 100 and 200

Rule (the DLPerf TF2 report): the first window (steps 0-100) holds start-up and is skipped; the mean of the
printed global examples/second of every later window; or, by time stamps, samples between the first and the
last kept line / the time between them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import NUMBER, InOrder, LogFormat, Point, RunShape, glog_time, to_float

LINE = re.compile(
    rf"^(?:I(?P<mmdd>\d{{4}}) (?P<clock>\d\d:\d\d:\d\d\.\d+) .*?)?TimeHistory: (?P<seconds>{NUMBER}) seconds, "
    rf"(?P<speed>{NUMBER}) examples/second between steps (?P<start>\d+) and (?P<end>\d+)"
)
DAY = 86400.0
LEAP_YEAR = 2000  # glog prints no year; a leap year reads every date, Feb 29 included


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    offset, previous = 0.0, None
    for line in lines:
        m = LINE.search(line) if "TimeHistory" in line else None
        if not m:
            continue
        stamp = None
        if m["mmdd"]:
            stamp = glog_time(LEAP_YEAR, m["mmdd"], m["clock"]) + offset
            if previous is not None and stamp < previous - DAY:  # the run crossed New Year
                offset += 366 * DAY
                stamp += 366 * DAY
            previous = stamp
        steps = int(m["end"]) - int(m["start"])
        yield Point(
            step=int(m["end"]),
            start=int(m["start"]),
            speed=to_float(m["speed"]),
            seconds=to_float(m["seconds"]) / steps if steps > 0 else None,
            timestamp=stamp,
        )


FORMATS = (
    LogFormat(
        name="tf2-keras",
        description="TensorFlow 2 Keras TimeHistory lines (`N examples/second between steps A and B`)",
        signature=InOrder(("TimeHistory: ", r" examples/second between steps \d+ and \d+")),
        clue=("TimeHistory: ",),
        read=read,
        rules=("printed", "timestamp"),
        warmup=100,
        unit="images/s",
        practice="DLPerf TF2 report: the first window (steps 0-100) is start-up; steps 100 to the end are kept",
        framework="TF2 Keras",
    ),
)
