"""MLPerf training logs (mlperf-logging): `:::MLLOG` JSON lines; throughput comes from `tracked_stats`:

:::MLLOG {"namespace": "", "time_ms": 1593990186014, "event_type": "POINT_IN_TIME", "key": "tracked_stats",
"value": {"throughput": 2811.3}, "metadata": {"file": "train.py", "lineno": 210, "step": 200}}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
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
    for line in lines:
        event = _event(line)
        if event is None or event.get("key") != "tracked_stats":
            continue
        value, metadata = event.get("value"), event.get("metadata")
        speed = _number(value.get("throughput")) if isinstance(value, dict) else None
        step = metadata.get("step") if isinstance(metadata, dict) else None
        step = step[-1] if isinstance(step, list) and step else step
        time_ms = _number(event.get("time_ms"))
        if speed is None:
            continue
        yield Point(
            step=int(step) if _number(step) is not None else None,
            speed=speed,
            timestamp=None if time_ms is None else time_ms / 1000,
        )


FORMATS = (
    PeerFormat(
        name="mlperf",
        description="MLPerf `:::MLLOG {json}` lines; `tracked_stats` events with `throughput` (global samples/s)",
        signature=re.compile(r":::MLLOG \{.*\"key\": \"tracked_stats\""),
        read=read,
        rules=("printed", "timestamp"),
        warmup=1,
        window=None,
        practice="the first tracked interval holds start-up; the rest are kept",
    ),
)
