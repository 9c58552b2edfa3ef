"""An embedded results history (SQLite): every record kept under a label, so versions can be compared over time."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import statistics
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import ResultsError
from dlperf.records.load import RecordLike, as_json, as_record
from dlperf.records.schema import RunRecord
from dlperf.records.validate import is_number, record_problem
from dlperf.reporting.sources import canonical_model
from dlperf.reporting.verdict import compare_repeats

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_key     TEXT PRIMARY KEY,   -- sha256 of the record's content: the same record is stored once, two
                                    -- records alike in model/group/case/repeat (two extracted sources) both
    label       TEXT NOT NULL,      -- what is being compared: a version, a commit, a driver ...
    model       TEXT NOT NULL,
    grp         TEXT NOT NULL,
    case_name   TEXT NOT NULL,
    repeat      INTEGER,
    status      TEXT NOT NULL,
    throughput  REAL,
    started_at  REAL,
    record      TEXT NOT NULL       -- the whole JSON record
);
CREATE INDEX IF NOT EXISTS runs_case ON runs (model, grp, case_name, label);
"""


def _connect(db: str | Path, create: bool = True) -> sqlite3.Connection:
    path = Path(db)
    if path.is_dir():
        raise ResultsError(
            f"history database {db} is a folder, not a database file: give a file path (--db or DLPERF_HISTORY), "
            "such as ~/.dlperf/history.sqlite"
        )
    if not create and not path.is_file():
        raise ResultsError(f"history database {db} does not exist: store results first with `dlperf history add DIR`")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path)
        connection.executescript(SCHEMA)
    except (OSError, sqlite3.Error) as error:
        raise ResultsError(f"cannot open history database {db}: {error}; choose another --db") from None
    return connection


def default_label(record: RunRecord) -> str:
    """The dlperf commit that measured a record (short), else its version."""
    git = (record.env or {}).get("git") or {}
    return git["commit"][:12] if git.get("commit") else f"v{record.dlperf_version or 'unknown'}"


def record_key(record: RecordLike) -> str:
    """The record's identity: a hash of its content (private `_` keys, such as where it was read from, left out)."""
    return hashlib.sha256(_record_text(record).encode()).hexdigest()


def _record_text(record: RecordLike) -> str:
    """The record's JSON as read (keys this dlperf does not declare included), the stored copy and its identity."""
    return json.dumps({k: v for k, v in as_json(record).items() if not k.startswith("_")}, sort_keys=True, default=str)


@dataclass(frozen=True)
class AddOutcome:
    """What `add_records` did: records newly stored, and those already there with the very same content."""

    stored: list[RunRecord]
    duplicates: list[RunRecord]


def add_records(db: str | Path, records: Sequence[RecordLike], label: str | None = None) -> AddOutcome:
    """Store each record once, keyed by its content; nothing is dropped but a true duplicate. An invalid record is
    refused before anything is stored: one stored text in the REAL column would break every later `history show`."""
    records = [as_record(r) for r in records]
    for r in records:
        problem = record_problem(as_json(r))
        if problem:
            raise ResultsError(f"not adding {r.origin.path or 'a record'} to the history: {problem}")
    rows = [
        (
            record_key(r),
            label or default_label(r),
            r.model,
            r.group,
            r.case,
            r.repeat,
            r.status,
            r.throughput if r.status == "ok" else None,
            r.started_at,
            _record_text(r),
        )
        for r in records
    ]
    stored, duplicates = [], []
    with closing(_connect(db)) as connection:
        try:
            with connection:
                for record, row in zip(records, rows):
                    before = connection.total_changes
                    connection.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
                    (stored if connection.total_changes > before else duplicates).append(record)
        except sqlite3.Error as error:  # locked by another writer, or a table of another shape: nothing stored
            raise ResultsError(
                f"cannot store into history database {db}: {error}; try again, or another --db"
            ) from None
    return AddOutcome(stored, duplicates)


@dataclass(frozen=True)
class HistoryPoint:
    """A case's median throughput under one label; `change` is the ratio to the label before it, and `verdict`
    compare's verdict of its repeats against that label's (None for a case's first label or where one failed)."""

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


def _read_rows(db: str | Path, case: str | None) -> list[Row]:
    """The stored runs (of one case, if given), each checked: a malformed row is named, not read."""
    query = "SELECT model, grp, case_name, label, started_at, status, throughput FROM runs"
    params = [case] if case else []
    if case:
        query += " WHERE case_name = ?"
    with closing(_connect(db, create=False)) as connection:
        try:
            rows = connection.execute(query, params).fetchall()
        except sqlite3.Error as error:
            raise ResultsError(
                f"history database {db} is not one dlperf wrote ({error}): choose another --db"
            ) from None
    for row in rows:
        numbers_ok = all(v is None or is_number(v) for v in (row[4], row[6]))
        if not all(isinstance(v, str) for v in row[:4]) or not numbers_ok:
            raise ResultsError(
                f"history database {db} holds a malformed row ({'/'.join(map(str, row[:4]))[:120]}, started_at "
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
    change = median / statistics.median(before) if median is not None and before else None
    # The history keeps each run's throughput, not its windows: each repeat is one figure to the test.
    verdict = compare_repeats([[b] for b in before], [[s] for s in speeds]) if before and speeds else None
    return HistoryPoint(
        *key,
        min(t for t, _ in runs),
        median,
        len(runs),
        change,
        verdict.verdict if verdict else None,
        verdict.reason if verdict else None,
    )
