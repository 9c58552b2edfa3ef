"""Records as their declared dataclasses (`records/schema.py`), one file or every record of a results folder, for
report, compare, history and predict: readers read attributes, so a misspelled field fails where it is read."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dlperf.errors import ResultsError
from dlperf.records.codec import decode
from dlperf.records.lock import writer_of
from dlperf.records.paths import SWEEP_RUNS, resume_command
from dlperf.records.schema import KINDS, READABLE, Origin, Record, RunRecord, declared_kind, declared_values, upgrade
from dlperf.records.validate import check_file
from dlperf.records.walk import find_named

OnSkip = Callable[[Path, str], None]
RecordLike = Record | Mapping[str, Any]  # a loaded record, or a record's JSON as a writer or a test builds it


def as_record(data: RecordLike, path: str | Path | None = None) -> Record:
    """A record's JSON as its declared kind (`declared_kind`; an older version upgraded first), decoded by the
    codec: each declared key an attribute of its declared type (a part its dataclass), absent ones None; a
    commbench record's run fields as its `run`. The JSON is kept as read in `origin`, where an absent key differs
    from a null one and the keys its kind does not declare stay, unread. A loaded record is returned as it is; a
    value not of its declared type is a DecodeError naming the field (a loader has checked the file first:
    `records/validate.py`)."""
    if isinstance(data, KINDS):
        return data
    loaded: dict[str, Any] = {"origin": Origin(None if path is None else str(path), MappingProxyType(dict(data)))}
    data = upgrade(dict(data))
    kind = declared_kind(data)
    (_, own), *shared = declared_values(kind, data)
    if shared:  # the run fields a kind shares, but those it declares itself (a commbench record's `warmup`)
        loaded["run"] = decode(*shared[0])
    return dataclasses.replace(decode(kind, own), **loaded)


def as_json(record: RecordLike) -> dict[str, Any]:
    """A record's JSON as it was read or built (undeclared keys included): what the history stores."""
    return dict(as_record(record).origin.data)


def load_record(path: str | Path, schemas: tuple[str, ...] = READABLE) -> Record | None:
    """A checked record of one of `schemas` (default: run records, upgraded) as its declared kind, or None when the
    file is missing, partial, invalid or not one."""
    data = check_file(path, schemas)[0]
    return None if data is None else as_record(data, path)


def warn_skipped(path: Path, reason: str) -> None:
    """One stderr line per record left out, so a changed median never goes unexplained."""
    print(f"dlperf: skipped record {ascii(str(path))[1:-1]}: {reason}", file=sys.stderr)


def find_records(root: str | Path, schemas: tuple[str, ...] = READABLE, on_skip: OnSkip = warn_skipped) -> list[Record]:
    """Every valid record of `schemas` (default: run records) under `root` as its declared kind, in a stable order;
    each broken or invalid run record goes to `on_skip` with the reason (never silently dropped, never fatal), and
    so does each copy of a record already read (a copied file must not count as another repeat)."""
    records = []
    if not Path(root).is_dir():
        return records
    seen: dict[str, Path] = {}  # a record's content -> the first file that held it
    for path in find_named(root, ".json", on_skip):
        if not path.is_file():
            on_skip(path, "is not a regular file")
            continue
        record, problem = check_file(path, schemas)
        content = json.dumps(record, sort_keys=True) if record is not None else ""
        if problem:
            on_skip(path, problem)
        elif record is not None and content in seen:
            on_skip(path, f"is a copy of {ascii(str(seen[content]))[1:-1]}: counted once")
        elif record is not None:
            seen[content] = path
            records.append(as_record(record, path))
    return records


def load_records(root: str | Path, on_skip: OnSkip = warn_skipped) -> list[RunRecord]:
    """`find_records` for a folder the user named: a missing or empty folder is their error to fix."""
    folder = Path(root)
    if folder.exists() and not folder.is_dir():
        raise ResultsError(f"{root} is a file, not a results folder: pass a folder written by run, sweep or extract")
    if not folder.is_dir():
        raise ResultsError(f"results folder {root} does not exist: pass a folder written by run, sweep or extract")
    records = find_records(folder, on_skip=on_skip)
    if not records:
        if writer := writer_of(folder):
            raise ResultsError(
                f"no run records under {root} yet: it is in use by {writer}; report it when that run finishes"
            )
        if (folder / SWEEP_RUNS).is_file():
            raise ResultsError(
                f"no run records under {root} yet: its sweep was interrupted before its first record; finish it "
                f"with `{resume_command(root)}`"
            )
        logs = _log_files(folder)
        if logs:
            raise ResultsError(
                f"no dlperf run records (*.json) under {root}, but {logs} log file{'s' if logs > 1 else ''}: read "
                f"another framework's logs with `dlperf extract {root} --out RECORDS`, then give RECORDS"
            )
        raise ResultsError(f"no dlperf run records (*.json) under {root}: run `dlperf run` or `dlperf sweep` first")
    return records


LOG_SUFFIXES = (".log", ".txt", ".out")
MAX_LISTED = 10_000  # entries looked at for the hint: a huge tree is not walked whole for one message


def _log_files(folder: Path) -> int:
    """How many files under `folder` look like training logs (for the hint that `dlperf extract` reads them):
    walked with a stack of its own, at most MAX_LISTED entries, so a hostile tree costs neither recursion nor time."""
    count, seen, stack = 0, 0, [folder]
    while stack and seen < MAX_LISTED:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                seen += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.name.endswith(LOG_SUFFIXES):
                    count += 1
    return count
