"""MLPerf training logs (mlperf-logging): `:::MLLOG {json}` lines. A file holding them is MLPerf, whatever else
it prints (DLRM's HugeCTR lines, launcher noise).

MLPerf publishes time to train, not throughput. Rule: the frameworks' own `tracked_stats` progress events,
the first one (start-up, compiling) skipped and the rest averaged: `throughput` (samples/s), or a time per
step (`train_step_timing`, maskrcnn's `time`) read as global batch / time. A `throughput` event of its own
(maskrcnn) joins the step before it. Where a log has no progress events but timed training blocks (Habana's
BERT: `block_stop` with the iteration count), each block gives global batch x iterations / block time. A
framework's whole-run figure logged after `run_stop` is used only when nothing else is there (DLRM).

Per device or global: `throughput` is global unless the log declares a `local_batch_size` (NVIDIA's SSD logs
its per-process throughput so): then it is per device, x world size.
Time stamps: `time_ms`; the progress count is `epoch_num` (cumulative samples, BERT) or `step_num` (iterations,
stable diffusion); a `step` counts epochs (resnet, ssd, rnnt, unet3d), whose sample count the log does not
reliably give, so those logs have the printed rule only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from dlperf.peers.base import PeerFormat, Point, RunShape

PREFIX = ":::MLLOG "


def _number(value: Any) -> float | None:
    """A finite JSON number (bools and huge integers are not figures)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _event(line: str) -> dict[str, Any] | None:
    start = line.find(PREFIX)
    if start < 0:
        return None
    try:
        event = json.loads(line[start + len(PREFIX) :])
    except (ValueError, RecursionError):
        return None
    return event if isinstance(event, dict) else None


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    batch = float(shape.global_batch)
    scale = 1.0
    index = 0
    stopped = False
    summary: Point | None = None
    last_block: float | None = None
    blocks_done = 0.0
    tracked_seen = False
    for line in lines:
        event = _event(line) if PREFIX in line else None
        if event is None:
            continue
        key, value = event.get("key"), event.get("value")
        metadata = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        time_ms = _number(event.get("time_ms"))
        stamp = None if time_ms is None else time_ms / 1000
        if key == "global_batch_size" and (number := _number(value)):
            batch = number
        elif key == "local_batch_size":
            scale = float(shape.world_size)
        elif key == "run_stop":
            stopped = True
        elif key == "block_start" and not tracked_seen:
            last_block = stamp
        elif key == "block_stop" and not tracked_seen and stamp is not None and last_block is not None:
            count, done = _number(metadata.get("epoch_count")), _number(metadata.get("first_epoch_num"))
            if done is not None and count is None and done > blocks_done and stamp > last_block:
                # Habana: first_epoch_num is the iteration count at the block's end
                index += 1
                seconds = (stamp - last_block) / (done - blocks_done)
                yield Point(step=index, speed=batch / seconds, seconds=seconds, timestamp=stamp, samples=done * batch)
                blocks_done = done
            last_block = None
        elif key == "throughput" and (number := _number(value)) is not None and index:
            yield Point(step=index, speed=number * scale, timestamp=stamp)
        elif key == "tracked_stats" and isinstance(value, dict):
            tracked_seen = True
            speed = _number(value.get("throughput"))
            seconds = _number(value.get("train_step_timing", value.get("time")))
            if speed is None and seconds is None:
                continue
            if speed is None and seconds and "train_step_timing" in value:  # the log's own global batch
                speed = batch / seconds / scale
            point = Point(
                step=index + 1,
                speed=None if speed is None else speed * scale,
                seconds=seconds,
                timestamp=stamp,
                samples=_samples(metadata, batch),
            )
            if stopped or isinstance(metadata.get("step"), list):
                summary = summary or point
                continue
            index += 1
            yield point
    if index == 0 and summary is not None:  # the whole-run figure is taken as it is: no warm-up inside it
        yield replace(summary, step=1, start=1)


def _samples(metadata: dict[str, Any], batch: float) -> float | None:
    """The event's cumulative sample count, where its progress key gives one."""
    if (samples := _number(metadata.get("epoch_num"))) is not None:
        return samples
    if (steps := _number(metadata.get("step_num"))) is not None:
        return steps * batch
    return None


FORMATS = (
    PeerFormat(
        name="mlperf",
        description="MLPerf `:::MLLOG {json}` logs: `tracked_stats` progress events, or timed blocks; per device "
        "where the log declares a local_batch_size",
        signature=re.compile(r":::MLLOG \{"),
        record_start=re.compile(r":::MLLOG \{"),
        read=read,
        rules=("printed", "timestamp"),
        warmup=1,
        window=None,
        steps_are_iterations=False,
        practice="MLPerf publishes time to train only: the mean of the frameworks' own tracked figures after the "
        "first event; a framework's whole-run figure (after run_stop) only where there is nothing else",
    ),
)
