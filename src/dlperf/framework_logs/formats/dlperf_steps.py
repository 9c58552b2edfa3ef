"""The run's stream of dlperf's instrumentation hook (instrument/startup/sitecustomize.py, merged from each
process's side file by framework_logs/hookranks.py), one line per update of the model:

    <step> <monotonic seconds after it> <the step's global samples, or - where the run counted none> 0 <tokens, or ->

and marks of the stretches a trainer's own figure covers (`train <begin> <end>`: transformers' train_runtime;
`epoch <time>`: a Lightning epoch began), read by `trace` for the like-for-like comparison.

Read by the timestamp rule with the run's own warm-up and window (`--warmup-iters`, `--iters`, as native runs), the
window starting where the updates' times settle past that warm-up (settle.py): samples between the last warm-up
step and the window's last, over the time between them. The steps of a run that counted no samples at any update
(`-`) count the case's global batch (the record says so); a run that counted some has 0 for the others
(hookranks.py). Never detected in a log: a `--command` run names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import HookTrace, LogFormat, Point, RunShape

LINE = re.compile(r"^(\d+) (\d+\.\d+) (\d+|-)(?: \d+ (?:\d+|-))?$")  # a process's rank and tokens after
MARK = re.compile(r"^(train|epoch)((?: \d+\.\d+)+)$")
NAME = "dlperf-steps"


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    samples = 0
    for line in lines:
        m = LINE.match(line)
        if m is None:
            continue
        samples += int(m[3]) if m[3] != "-" else shape.global_batch
        yield Point(step=int(m[1]), timestamp=float(m[2]), samples=samples)


def trace(lines: Iterable[str], global_batch: int) -> HookTrace:
    """The whole file: every step's time and samples, the last `train` span, every epoch's start."""
    times: dict[int, float] = {}
    samples: dict[int, float] = {}
    train, epochs = None, []
    for line in lines:
        if m := LINE.match(line):
            times[int(m[1])] = float(m[2])
            samples[int(m[1])] = int(m[3]) if m[3] != "-" else global_batch
        elif m := MARK.match(line):
            stamps = [float(t) for t in m[2].split()]
            if m[1] == "epoch":
                epochs.append(stamps[0])
            elif len(stamps) == 2:
                train = (stamps[0], stamps[1])
    return HookTrace(times, samples, train, tuple(epochs))


FORMATS = (
    LogFormat(
        name=NAME,
        description="dlperf's instrumentation side file: one line per optimizer step (step, time, samples); "
        "read by the run that wrote it, never detected",
        signature=re.compile(r"(?!)"),  # never detected: named by the run that wrote it
        read=read,
        rules=("timestamp",),
        warmup=20,
        window=100,
        practice="dlperf's own: samples over time between the end of the warm-up and the window's last step",
    ),
)
