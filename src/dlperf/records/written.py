"""Records as their writers make them: built as their kind's declared dataclass (`records/schema.py`), so a key no
declaration has (a writer's misspelling) or a value not of its type fails where it is written, in use as in the test
suite; then written by the codec, every declared field."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlperf.records.codec import adapter
from dlperf.records.load import RecordLike, as_record
from dlperf.records.schema import KINDS, Record, declared_fields, declared_kind, undeclared_fields
from dlperf.records.store import write_json_atomic


def typed(record: RecordLike) -> Record:
    """A writer's record as its declared kind; TypeError names the keys no declaration has."""
    if isinstance(record, KINDS):
        return record
    undeclared = undeclared_fields(dict(record))
    if undeclared:
        kind = declared_kind(record).__name__
        raise TypeError(f"{kind} does not declare {', '.join(undeclared)} (dlperf.records.schema)")
    return as_record(record)


def with_fields(record: Record, fields: Mapping[str, Any]) -> Record:
    """The record with `fields` set (a sweep's id, the repeats decision), checked as a writer's record is."""
    return typed({**record_json(record), **fields}) if fields else record


def record_json(record: Record) -> dict[str, Any]:
    """The record's JSON as the codec dumps it: every field its kind declares (null where nothing was measured); a
    commbench record's shared run fields after its own, those that have a value."""
    own = _dumped(record)
    run = getattr(record, "run", None)
    if run is None:
        return own
    return {**own, **{k: v for k, v in _dumped(run, exclude_none=True).items() if k not in own}}


def _dumped(record: Any, exclude_none: bool = False) -> dict[str, Any]:
    names = {f.name for f in declared_fields(type(record))}
    return adapter(type(record)).dump_python(record, include=names, exclude_none=exclude_none)


def write_record(path: str | Path, record: RecordLike) -> Record:
    """A run's, an extracted log's or a search's record, atomically, as its declared kind; returns it as written
    there (its `origin`)."""
    data = record_json(typed(record))
    write_json_atomic(path, data)
    return as_record(data, path)
