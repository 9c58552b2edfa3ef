"""The results history: every record kept under a label, so versions can be compared over time, in an embedded
SQLite file or on a PostgreSQL server a team shares (`reporting/history_db.py`)."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dlperf.errors import ResultsError
from dlperf.records.load import RecordLike, as_json, as_record
from dlperf.records.schema import RunRecord
from dlperf.records.validate import is_number, record_problem
from dlperf.reporting.history_db import open_store, parse_target, unstorable
from dlperf.reporting.sources import canonical_model
from dlperf.reporting.verdict import Verdict, compare_repeats, side_mean


def default_label(record: RunRecord) -> str:
    """The dlperf commit that measured a record (short), else its version."""
    git = (record.env or {}).get("git") or {}
    return git["commit"][:12] if git.get("commit") else f"v{record.dlperf_version or 'unknown'}"


def record_key(record: RecordLike) -> str:
    """The record's identity: a hash of its content (private `_` keys, such as where it was read from, left out)."""
    return _key(_record_text(_stored_json(record)))


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _stored_json(record: RecordLike) -> dict:
    """The record's JSON as read (keys this dlperf does not declare included), private `_` keys left out."""
    return {k: v for k, v in as_json(record).items() if not k.startswith("_")}


def _record_text(data: dict) -> str:
    """The stored copy of a record's JSON, and what its identity hashes."""
    return json.dumps(data, sort_keys=True, default=str)


@dataclass(frozen=True)
class AddOutcome:
    """What `add_records` did: records newly stored, those already there with the very same content, and those no
    store can hold (with why), which were not stored while the others were."""

    stored: list[RunRecord]
    duplicates: list[RunRecord]
    refused: list[tuple[RunRecord, str]] = field(default_factory=list)


def add_records(db: str | Path, records: Sequence[RecordLike], label: str | None = None) -> AddOutcome:
    """Store each record once, keyed by its content; nothing is dropped but a true duplicate. An invalid record is
    refused before anything is stored: one stored text in the REAL column would break every later `history show`.
    A valid record no store can hold (a NUL in a text, a record too large) is refused by name, the others stored."""
    records = [as_record(r) for r in records]
    for r in records:
        _refuse_invalid(r)
    kept, refused = _rows(records, label)
    with open_store(db) as store:
        added = store.add([row for _, row in kept])
    stored = [r for (r, _), new in zip(kept, added) if new]
    duplicates = [r for (r, _), new in zip(kept, added) if not new]
    return AddOutcome(stored, duplicates, refused)


def _refuse_invalid(record: RunRecord) -> None:
    problem = record_problem(as_json(record))
    if problem:
        raise ResultsError(f"not adding {record.origin.path or 'a record'} to the history: {problem}")


def _rows(
    records: list[RunRecord], label: str | None
) -> tuple[list[tuple[RunRecord, tuple]], list[tuple[RunRecord, str]]]:
    """Each record with its row, where every store can hold it; and those none can, with why."""
    rows = [(r, *_row(r, label)) for r in records]
    return [(r, row) for r, row, problem in rows if not problem], [(r, problem) for r, _, problem in rows if problem]


def _row(r: RunRecord, label: str | None) -> tuple[tuple, str | None]:
    """A record's row in the store (its key, label, case, status, throughput where ok, start and text), and why no
    store can hold it (None where every one can)."""
    data = _stored_json(r)
    text = _record_text(data)
    names = (label or default_label(r), r.model, r.group, r.case)
    row = (_key(text), *names, r.repeat, r.status, r.throughput if r.status == "ok" else None, r.started_at, text)
    return row, unstorable(names, data, text)


@dataclass(frozen=True)
class HistoryPoint:
    """A case's throughput under one label: its runs' median and geometric `mean`; `change` is the ratio of `mean`
    to the label before's (compare's ratio, so it points the way the verdict does), and `verdict` compare's verdict
    of its repeats against that label's (None for a case's first label or where one failed)."""

    model: str
    group: str
    case: str
    label: str
    first_seen: float
    median: float | None
    runs: int
    change: float | None
    verdict: str | None = None
    verdict_reason: str | None = None
    mean: float | None = None


Row = tuple  # (model, grp, case_name, label, started_at, status, throughput), as stored
SeriesKey = tuple[str, str, str, str]  # canonical model, group, case, label


def history(db: str | Path, model: str | None = None, case: str | None = None) -> list[HistoryPoint]:
    """Per case, one point per label in the order the labels were first measured. Models meet under their
    canonical name (`rn50`, `ResNet-50` and `resnet50` are one model), as in the cross-source report."""
    grouped = _by_label(_read_rows(db, case), canonical_model(model) if model else None)
    points: list[HistoryPoint] = []
    previous: dict[tuple[str, str, str], list[float]] = {}
    ordered = sorted(grouped.items(), key=lambda item: (item[0][:3], min(t for t, _ in item[1])))
    for key, runs in ordered:
        speeds = [s for _, s in runs if s is not None]
        points.append(_point(key, runs, speeds, previous.get(key[:3])))
        previous[key[:3]] = speeds
    return points


def label_records(db: str | Path, label: str) -> list[RunRecord]:
    """Every record stored under `label`, as read back (each was checked when it was added)."""
    with open_store(db, create=False) as store:
        found, labels = store.records(label)
    if not found:
        shown = ", ".join(labels[:20]) + (" ..." if len(labels) > 20 else "")
        raise ResultsError(
            f"history database {parse_target(db).shown} has no records labelled {label!r}; its labels: "
            f"{shown or 'none'}"
        )
    return [as_record(json.loads(r) if isinstance(r, str) else r) for r in found]


def _read_rows(db: str | Path, case: str | None) -> list[Row]:
    """The stored runs (of one case, if given), each checked: a malformed row is named, not read."""
    with open_store(db, create=False) as store:
        rows = store.rows(case)
    shown = parse_target(db).shown
    for row in rows:
        numbers_ok = all(v is None or is_number(v) for v in (row[4], row[6]))
        if not all(isinstance(v, str) for v in row[:4]) or not numbers_ok:
            raise ResultsError(
                f"history database {shown} holds a malformed row ({'/'.join(map(str, row[:4]))[:120]}, started_at "
                f"{str(row[4])[:40]!r}, throughput {str(row[6])[:40]!r}): delete it with sqlite3, or another --db"
            )
    return rows


def _by_label(rows: list[Row], wanted: str | None) -> dict[SeriesKey, list[tuple[float, float | None]]]:
    """Each (model, group, case, label)'s runs as (started_at, throughput or None when not ok)."""
    grouped: dict[SeriesKey, list[tuple[float, float | None]]] = {}
    for name, group, case_, label, started, status, throughput in rows:
        model_ = canonical_model(name)
        if wanted is None or model_ == wanted:
            grouped.setdefault((model_, group, case_, label), []).append(
                (started or 0.0, throughput if status == "ok" else None)
            )
    return grouped


def _point(
    key: SeriesKey, runs: list[tuple[float, float | None]], speeds: list[float], before: list[float] | None
) -> HistoryPoint:
    """One label's point, compared with the label before it (`before`: that label's speeds)."""
    median = statistics.median(speeds) if speeds else None
    mean, previous = side_mean([[s] for s in speeds]), side_mean([[b] for b in before or []])
    change = mean / previous if mean is not None and previous is not None else None
    verdict = _verdict(before or [], speeds)
    return HistoryPoint(
        *key,
        min(t for t, _ in runs),
        median,
        len(runs),
        change,
        verdict.verdict if verdict else None,
        verdict.reason if verdict else None,
        mean,
    )


def _verdict(before: list[float], speeds: list[float]) -> Verdict | None:
    """Compare's verdict of a label's runs against the label before, where both have some. The history keeps each
    run's throughput, not its windows: each repeat is one figure to the test."""
    return compare_repeats([[b] for b in before], [[s] for s in speeds]) if before and speeds else None
