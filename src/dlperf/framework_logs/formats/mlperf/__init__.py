"""MLPerf training logs (mlperf-logging): `:::MLLOG {json}` lines, every round v1.0-v5.x. A file holding them is
MLPerf, whatever else it prints (DLRM's HugeCTR lines, launcher noise, exit tracebacks after `run_stop`).

MLPerf publishes time to train, not throughput. The figure is read from the progress the log has, in this order:
1. `tracked_stats` progress events (the first one, start-up and compiling, skipped; the rest averaged): a
   `throughput`, or where the log prints none a step time (`train_step_timing`, `train_step_timing in s`,
   `train_step_time`, maskrcnn's `time`): the global batch over the summed step time. A `throughput` event of its
   own joins the tracked step before it (maskrcnn), and is the progress itself where the log has no tracked steps
   (Intel's, CTuning's, Krai's ResNet).
2. Timed blocks (`block_start`/`block_stop`) where there are no progress events: samples in the block / its time.
   A block's samples come from the counts the benchmark keeps (mlperf_logging's `samples_count`, `epoch_num`,
   `first_epoch_num` + `epoch_count`), converted by what the benchmark counts: epochs (x the data set's size),
   tokens (/ `max_sequence_length`), iterations (Habana's block counters, x the global batch) or samples.
3. One whole-run figure (gnn's and DLRM's `tracked_stats`, before or after `run_stop`), taken as it is.
4. Epochs (`epoch_start`/`epoch_stop`) where the log times nothing else (tinygrad's logs): timed like blocks, an
   epoch benchmark's epoch being its data set, a sample-counted one's the count its evaluations reached.

Units are the benchmark's own (`counting`); per device or global is decided by evidence (`evidence`). A `run_stop`
with status success ends the run well: Python's exit noise after it is not a failure. One module per job: the
`:::MLLOG` lines as `events`, what the log declares and counts (`counting`), its own `evidence`, the timed `blocks`,
and the figures in the order above as the events stream past (`log`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import LogFormat, Point, RunShape
from dlperf.framework_logs.formats.mlperf.events import events
from dlperf.framework_logs.formats.mlperf.log import MlperfLog


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    log = MlperfLog(shape)
    for event in events(lines):
        yield from log.feed(event)
    yield from log.finish()


FORMATS = (
    LogFormat(
        name="mlperf",
        description="MLPerf `:::MLLOG {json}` logs (v1.0-v5.x): `tracked_stats` progress, step times, timed blocks "
        "counted in samples, tokens, epochs or iterations, or one whole-run figure; per device or global by evidence",
        signature=re.compile(r":::MLLOG \{"),
        record_start=re.compile(r":::MLLOG \{"),
        clue=(":::MLLOG {",),
        reads=(":::MLLOG ", '"key": "run_stop"'),
        success=re.compile(r'"key": "run_stop".*"status": "success"'),
        read=read,
        check_reading="each interval's time stamps x its count (epochs x the data set, samples, tokens / sequence)",
        rules=("printed", "timestamp"),
        warmup=1,
        steps_are_iterations=False,
        practice="MLPerf publishes time to train only: the mean of the frameworks' own tracked figures (or timed "
        "blocks) after the first; one whole-run figure where that is all the log has (mlperf_logging keys, each "
        "benchmark's counting unit)",
    ),
)
