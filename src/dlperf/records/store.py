"""Atomic writes, and the checks before writing: a reader never sees half a file, nothing is replaced unasked."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.records.paths import RunPaths


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write through a temporary file renamed into place, with the mode a plain `open` would give (the umask's):
    mkstemp makes files 0600, which would hide a shared results folder from the team."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def check_writable(out: str | Path) -> None:
    """Fail up front, not after an hour of measuring, when results cannot be written."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".dlperf-write-test-{uuid.uuid4().hex}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as error:
        raise ResultsError(
            f"cannot write results folder {out}: {error.strerror or error}; choose another --out"
        ) from None


def claim_paths(paths: RunPaths, overwrite: bool) -> None:
    """Refuse to replace an existing run unless asked; clear it when asked."""
    existing = [p for p in (paths.log, paths.record) if p.exists()]
    if existing and not overwrite:
        raise ResultsError(f"{existing[0]} already exists: pass --overwrite to replace it, or another --out")
    for path in (paths.log, paths.record, paths.console):
        path.unlink(missing_ok=True)
    paths.folder.mkdir(parents=True, exist_ok=True)
