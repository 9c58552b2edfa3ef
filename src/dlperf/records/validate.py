"""Checking a record before a report, compare or history trusts it: types, ranges, finite numbers.

A results folder is shared, copied and edited by hand; one bad file must neither vanish silently (changing a
median) nor kill the command. `record_problem` names what is wrong, `check_file` reads and checks one file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dlperf.records.schema import READABLE, upgrade

STATUSES = ("ok", "failed", "diverged")
TEXT_FIELDS = ("model", "case", "group", "precision")
COUNT_FIELDS = ("nodes", "devices_per_node", "world_size")  # positive integers
OPTIONAL_COUNTS = ("repeat", "batch_size", "batch_size_per_device", "micro_batch_size", "global_batch_size")
OPTIONAL_NUMBERS = ("elapsed_s", "first_step_s", "started_at", "finished_at")


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record_problem(record: dict[str, Any]) -> str | None:
    """Why a (readable, upgraded) record cannot be used, or None when it can."""
    status = record.get("status")
    if status not in STATUSES:
        return f"status {short(status)} is not one of {', '.join(STATUSES)}"
    for key in TEXT_FIELDS:
        if not isinstance(record.get(key), str) or not record[key]:
            return f"{key} {short(record.get(key))} is not a name"
    for key in COUNT_FIELDS:
        if not is_count(record.get(key)):
            return f"{key} {short(record.get(key))} is not a positive integer"
    for key in OPTIONAL_COUNTS:
        if record.get(key) is not None and not is_count(record[key]):
            return f"{key} {short(record[key])} is not a positive integer"
    for key in OPTIONAL_NUMBERS:
        if record.get(key) is not None and not is_number(record[key]):
            return f"{key} {short(record[key])} is not a finite number"
    if status != "ok":
        return None
    for key in ("throughput", "throughput_per_device"):
        value = record.get(key)
        if (key == "throughput" or value is not None) and not (is_number(value) and value > 0):
            return f"{key} {short(value)} is not a positive finite number"
    windows = record.get("window_throughputs")
    if windows is not None and not (isinstance(windows, list) and all(is_number(w) and w >= 0 for w in windows)):
        return "window_throughputs is not a list of finite non-negative numbers"
    latency = record.get("latency_ms")
    if latency is not None and not (isinstance(latency, dict) and all(is_number(v) for v in latency.values())):
        return "latency_ms is not a mapping of finite numbers"
    return None


def short(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def check_file(path: str | Path) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None) for a usable record; (None, reason) for a broken or invalid one; (None, None) for a JSON
    file that is no run record at all (summary.json and the like), which readers pass over silently."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        return None, f"cannot be read: {error.strerror or error}"
    if not raw.strip():
        return None, "is empty"
    try:
        data = json.loads(raw, parse_constant=_refuse_constant)
    except ValueError as error:
        return None, f"is not valid JSON ({str(error)[:80]}): truncated or edited?"
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("dlperf.run/"):
        return None, None
    if data["schema"] not in READABLE:
        return None, f"has schema {short(data['schema'])}, newer than this dlperf reads: upgrade dlperf"
    problem = record_problem(upgrade(data))
    return (None, problem) if problem else (data, None)


def _refuse_constant(name: str) -> float:
    """NaN and Infinity are not JSON: a record holding them was not written by dlperf's strict writer."""
    raise ValueError(f"{name} is not a JSON number")
