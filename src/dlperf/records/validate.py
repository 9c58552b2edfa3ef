"""Checking a record before a report, compare or history trusts it: the declared types (`records/schema.py`),
ranges, finite numbers.

A results folder is shared, copied and edited by hand; one bad file must neither vanish silently (changing a
median) nor kill the command. `record_problem` names what is wrong, `check_file` reads and checks one file; after
them, readers may trust every declared field's type.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

from dlperf.records.codec import DecodeError, decode, short
from dlperf.records.schema import (
    READABLE,
    SCHEMA,
    THROUGHPUT_RANGE,
    RunRecord,
    declared_fields,
    declared_kind,
    declared_values,
    upgrade,
)

CASE_FOLDER = re.compile(r"\d+n\d+g")
MAX_DEPTH = 64  # no record dlperf writes nests deeper than ~6; deeper input is hostile or broken


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def field_problem(key: str, value: Any, check: str) -> str | None:
    """The declared check of one field beyond its type: a name, a count, a positive number or a throughput."""
    if check == "name":
        return None if isinstance(value, str) and value else f"{key} {short(value)} is not a name"
    problem = _range_problem(value, check) if value is not None else None
    return f"{key} {short(value)} {problem}" if problem else None


def _range_problem(value: Any, check: str) -> str | None:
    """A present value outside its declared range: a count, a positive number, a plausible throughput."""
    if check == "count" and not is_count(value):
        return "is not a positive integer"
    if check in ("positive", "throughput") and not (is_number(value) and value > 0):
        return "is not a positive finite number"
    low, high = THROUGHPUT_RANGE
    if check == "throughput" and not low <= value <= high:
        return f"is outside {low:g}..{high:g}: not a measurement"
    return None


def record_problem(record: dict[str, Any]) -> str | None:
    """Why a (readable) record cannot be used, or None when it can: every declared field of its kind checked, its
    range first (`records/schema.py`'s checks), then its type (the codec, at every depth)."""
    kind = declared_kind(record)
    if "status" not in record:
        return "status is missing"
    # its own fields, then those it shares (a commbench record's run fields) where present
    shared = [
        f for part, values in declared_values(kind, record)[1:] for f in declared_fields(part) if f.name in values
    ]
    for spec in [*declared_fields(kind), *shared]:
        problem = _declared_problem(record, spec)
        if problem:
            return problem
    if record.get("status") == "ok" and issubclass(kind, RunRecord) and record.get("throughput") is None:
        return "throughput None is not a positive finite number"  # an ok run without its figure
    return _type_problem(kind, record)


def _type_problem(kind: type, record: dict[str, Any]) -> str | None:
    """Why a record's values are not of their declared types, at every depth (the codec): its kind's own fields,
    then those it shares; None when they are."""
    for checked, values in declared_values(kind, record):
        try:
            decode(checked, values)
        except DecodeError as error:
            return str(error)
    return None


def _declared_problem(record: dict[str, Any], spec: dataclasses.Field) -> str | None:
    """One declared field: missing where the record needs it, else checked (a failed run's throughput may be
    null)."""
    if spec.name not in record:
        needed = spec.metadata["check"] == "name" or (spec.name == "throughput" and record.get("status") == "ok")
        return f"{spec.name} is missing" if needed else None
    value = record[spec.name]
    if spec.name.startswith("throughput") and record.get("status") != "ok" and value is None:
        return None
    return field_problem(spec.name, value, spec.metadata["check"])


def upgrade_problem(record: dict[str, Any]) -> str | None:
    """What an old record lacks for `upgrade`: a schema-1 GPT record derives its batch from `parallel`."""
    parallel = record.get("parallel")
    if record.get("schema") != "dlperf.run/1" or record.get("model") != "gpt" or parallel is None:
        return None
    if not isinstance(parallel, dict):
        return f"parallel {short(parallel)} is not a mapping"
    if not parallel.get("dp"):
        return None  # nothing to derive: upgrade leaves the batch as it is
    for key in ("dp", "global_batch_size"):
        if not is_count(parallel.get(key)):
            return f"parallel.{key} {short(parallel.get(key))} is not a positive integer"
    return None


def depth_problem(text: str | bytes) -> str | None:
    """Nesting deeper than MAX_DEPTH, found by counting brackets (no recursion): json.loads would recurse."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text.decode("utf-8", "replace") if isinstance(text, bytes) else text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return (
        f"is nested {deepest} levels deep (at most {MAX_DEPTH}): not a dlperf record" if deepest > MAX_DEPTH else None
    )


def parse_json(raw: bytes) -> tuple[Any, str | None]:
    """(data, None), or (None, why the text is no usable JSON): never a RecursionError."""
    problem = depth_problem(raw)
    if problem:
        return None, problem
    try:
        return json.loads(raw, parse_constant=_refuse_constant), None
    except ValueError as error:
        return None, f"is not valid JSON ({str(error)[:80]}): truncated or edited?"


def check_file(path: str | Path, schemas: tuple[str, ...] = READABLE) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None) for a usable record of `schemas` (default: run records); (None, reason) for a broken or
    invalid one; (None, None) for a JSON file that is no such record at all (summary.json and the like), which
    readers pass over silently."""
    runs = schemas == READABLE
    data, problem = _read_json(Path(path))
    if problem:  # a broken file is named by the run records' pass, once: other kinds' passes go by
        return None, problem if runs else None
    if not isinstance(data, dict):
        return None, None
    if "schema" not in data or data["schema"] not in schemas:
        return None, _unread_run_problem(data) if runs else None
    problem = _run_problem(data, Path(path)) if runs else record_problem(data)
    return (None, problem) if problem else (data, None)


def _read_json(path: Path) -> tuple[Any, str | None]:
    """The file's JSON, or why it holds none: unreadable, empty, or no valid JSON."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        return None, f"cannot be read: {error.strerror or error}"
    return parse_json(raw) if raw.strip() else (None, "is empty")


def _unread_run_problem(data: dict[str, Any]) -> str | None:
    """A run record this dlperf cannot read: its schema key lost, or a newer schema; None for other files."""
    if "schema" not in data:
        if "status" in data and "throughput" in data:
            return f'has no schema key: a run record edited by hand? add "schema": "{SCHEMA}"'
        return None
    if str(data["schema"]).startswith("dlperf.run/"):
        return f"has schema {short(data['schema'])}, newer than this dlperf reads: upgrade dlperf"
    return None


def _run_problem(record: dict[str, Any], path: Path) -> str | None:
    """A run record's gaps for `upgrade`, then its declared fields once upgraded, then its place."""
    return upgrade_problem(record) or record_problem(upgrade(record)) or place_problem(record, path)


def place_problem(record: dict[str, Any], path: Path) -> str | None:
    """Where a record's identity contradicts its file's place (`<model>/<case>/<stem>_<repeat>.json`): another
    case's record copied or moved there would be counted as this case's."""
    if record.get("kind") == "extracted" or not CASE_FOLDER.fullmatch(path.parent.name):
        return None  # not in the results layout: nothing to compare with
    found = {"model": path.parent.parent.name, "case": path.parent.name}
    number = path.stem.rsplit("_", 1)[-1]
    if number.isdigit() and record.get("repeat") is not None:
        found["repeat"] = int(number)
    wrong = [f"{key} {record.get(key)!r}" for key, value in found.items() if record.get(key) != value]
    if wrong:
        where = ", ".join(f"{key} {value!r}" for key, value in found.items())
        return f"holds the record of {', '.join(wrong)}, but its place says {where}: a copied or moved file?"
    return None


def job_problem(record: dict[str, Any], model: str, case: str, group: str, repeat: int) -> str | None:
    """Why a record is not the one a planned run (`--resume`) would write at its path, or None."""
    expected = {"model": model, "case": case, "group": group, "repeat": repeat}
    wrong = [
        f"{key} {record.get(key)!r} (expected {value!r})" for key, value in expected.items() if record.get(key) != value
    ]
    return f"holds another run's record: {', '.join(wrong)}" if wrong else None


def _refuse_constant(name: str) -> float:
    """NaN and Infinity are not JSON: a record holding them was not written by dlperf's strict writer."""
    raise ValueError(f"{name} is not a JSON number")
