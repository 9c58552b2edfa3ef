"""Every record of a results folder, for report, compare and history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.records.schema import READABLE, read_record


def find_records(root: str | Path, schemas: tuple[str, ...] = READABLE) -> list[dict[str, Any]]:
    """Every complete record of `schemas` (default: run records) under `root`, in a stable order."""
    records = []
    for path in sorted(Path(root).rglob("*.json")):
        record = read_record(path, schemas)
        if record is not None:
            record["_path"] = str(path)
            records.append(record)
    return records


def load_records(root: str | Path) -> list[dict[str, Any]]:
    """`find_records` for a folder the user named: a missing or empty folder is their error to fix."""
    folder = Path(root)
    if not folder.is_dir():
        raise ResultsError(f"results folder {root} does not exist: pass a folder written by run, sweep or extract")
    records = find_records(folder)
    if not records:
        raise ResultsError(f"no dlperf run records (*.json) under {root}: run `dlperf run` or `dlperf sweep` first")
    return records
