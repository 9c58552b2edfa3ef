"""Every record of a results folder, for report, compare and history."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.records.schema import READABLE
from dlperf.records.tree import find_named
from dlperf.records.validate import check_file

OnSkip = Callable[[Path, str], None]


def warn_skipped(path: Path, reason: str) -> None:
    """One stderr line per record left out, so a changed median never goes unexplained."""
    print(f"dlperf: skipped record {ascii(str(path))[1:-1]}: {reason}", file=sys.stderr)


def find_records(
    root: str | Path, schemas: tuple[str, ...] = READABLE, on_skip: OnSkip = warn_skipped
) -> list[dict[str, Any]]:
    """Every valid record of `schemas` (default: run records) under `root`, in a stable order; each broken or
    invalid run record goes to `on_skip` with the reason (never silently dropped, never fatal), and so does each
    copy of a record already read (a copied file must not count as another repeat)."""
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
            record["_path"] = str(path)
            records.append(record)
    return records


def load_records(root: str | Path, on_skip: OnSkip = warn_skipped) -> list[dict[str, Any]]:
    """`find_records` for a folder the user named: a missing or empty folder is their error to fix."""
    folder = Path(root)
    if not folder.is_dir():
        raise ResultsError(f"results folder {root} does not exist: pass a folder written by run, sweep or extract")
    records = find_records(folder, on_skip=on_skip)
    if not records:
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
