"""mlperf-logging's `:::MLLOG {json}` lines as events. A file holding them is MLPerf whatever else it prints (DLRM's
HugeCTR lines, launcher noise, exit tracebacks after `run_stop`), so every other line, and a line whose JSON is not an
object, is skipped; a value is a figure only where it is a finite JSON number (bools and huge integers are not)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

PREFIX = ":::MLLOG "


@dataclass(frozen=True)
class Event:
    """One event: its key, value and metadata, and its time stamp in seconds (None: it has none)."""

    key: Any
    value: Any
    metadata: dict[str, Any]
    stamp: float | None


def number(value: Any) -> float | None:
    """A finite JSON number (bools and huge integers are not figures)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        figure = float(value)
    except OverflowError:
        return None
    return figure if math.isfinite(figure) else None


def events(lines: Iterable[str]) -> Iterator[Event]:
    """The events among the lines, in order."""
    for line in lines:
        if PREFIX in line and (event := _event(line)) is not None:
            yield event


def _event(line: str) -> Event | None:
    try:
        event = json.loads(line[line.find(PREFIX) + len(PREFIX) :])
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict):
        return None
    metadata, time_ms = event.get("metadata"), number(event.get("time_ms"))
    stamp = None if time_ms is None else time_ms / 1000
    return Event(event.get("key"), event.get("value"), metadata if isinstance(metadata, dict) else {}, stamp)
