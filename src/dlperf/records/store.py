"""Atomic writes, and the checks before writing: a reader never sees half a file, nothing is replaced unasked."""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from dlperf.errors import DlperfError, ResultsError
from dlperf.records.paths import RunPaths

FULL = (errno.ENOSPC, errno.EDQUOT)


def write_error(path: Path, error: OSError) -> ResultsError:
    """One line naming the file that could not be written, and what to do: a full disk is resumable."""
    if error.errno in FULL:
        return ResultsError(
            f"cannot write {path}: {error.strerror} (the disk is full): free space, then rerun the same command "
            "with --resume (sweep) or --overwrite (run); the records written so far are kept"
        )
    if path.is_dir():
        return ResultsError(f"cannot write {path}: a directory is in the way; move it, or choose another --out")
    return ResultsError(f"cannot write {path}: {error.strerror or error}; choose another --out")


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


TMP_SUFFIX = ".tmp"  # an atomic write's temporary file is `.NAME.RANDOM.tmp` beside NAME (mkstemp's 8 characters)
TMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
RESULTS_DEPTH = 3  # OUT/model/case/record: the deepest a results folder writes


def stale_temporaries(folder: Path) -> list[Path]:
    """The temporary files of atomic writes that never finished in a results folder (a writer killed by SIGKILL
    or a power cut), as deep as dlperf writes and no deeper: the caller holds the folder's lock, so no write of
    its is under way."""
    found = []
    for depth in range(RESULTS_DEPTH + 1):
        found += [p for p in folder.glob("/".join(["*"] * depth + [".*.tmp"])) if TMP_NAME.match(p.name)]
    return [p for p in found if p.is_file()]


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    write_chunks_atomic(path, (data,))


def write_chunks_atomic(path: str | Path, chunks: Iterable[bytes]) -> None:
    """Write through a temporary file renamed into place, with the mode a plain `open` would give (the umask's):
    mkstemp makes files 0600, which would hide a shared results folder from the team. A failure leaves no
    temporary file and names `path`. `chunks` are written as they come: a stream is never held whole."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as error:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise write_error(path, error) from None
    except BaseException:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def check_free_space(folder: str | Path, need_bytes: int) -> None:
    """Refuse up front, not halfway through a sweep, when the results folder's disk cannot hold the output."""
    free = shutil.disk_usage(folder).free
    if free < need_bytes:
        raise ResultsError(
            f"only {free / 2**20:.1f} MiB free under {folder}, and these runs write about "
            f"{need_bytes / 2**20:.1f} MiB: free space, or choose another --out"
        )


def write_json_atomic(path: str | Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def check_writable(out: str | Path) -> Path | None:
    """Fail up front, not after an hour of measuring, when results cannot be written (a file in the way, a name
    longer than the file system takes, no permission). Returns the outermost folder it created (None where `out`
    existed), which `removed_if_refused` takes away again when the command is then refused."""
    folder = Path(out)
    try:
        if folder.exists() and not folder.is_dir():
            raise ResultsError(f"--out {out} is a file, not a results folder: choose another --out")
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".dlperf-write-test-{uuid.uuid4().hex}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as error:
        raise ResultsError(
            f"cannot write results folder {out}: {error.strerror or error}; choose another --out"
        ) from None
    return missing[-1] if missing else None


@contextlib.contextmanager
def removed_if_refused(created: Path | None) -> Iterator[None]:
    """Remove the folder `check_writable` created when the block refuses the command (a DlperfError before any run
    wrote there: amp-fp16 on a CPU, no CUDA device, a case over the machine's memory), so bad input leaves no empty
    results folder behind. Only the refusals before the first run go in the block."""
    try:
        yield
    except DlperfError:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def claim_paths(paths: RunPaths, overwrite: bool) -> None:
    """Refuse to replace an existing run unless asked; clear it when asked, with the temporary files a killed
    writer left behind."""
    for path in (paths.log, paths.record, paths.console):
        if path.is_dir():
            raise ResultsError(f"{path} is a directory where a run's file belongs: move it, or choose another --out")
    existing = [p for p in (paths.log, paths.record) if p.exists()]
    if existing and not overwrite:
        raise ResultsError(f"{existing[0]} already exists: pass --overwrite to replace it, or another --out")
    try:
        for path in (paths.log, paths.record, paths.console):
            path.unlink(missing_ok=True)
            for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
                leftover.unlink(missing_ok=True)
        paths.folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise write_error(paths.folder, error) from None
