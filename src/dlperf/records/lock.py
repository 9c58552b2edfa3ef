"""One writer per results folder: two sweeps on the same --out would interleave logs and replace each other's
records, measuring while the other ran. Readers (report, compare) take no lock and are never refused.

The lock is an advisory `flock` on `OUT/.dlperf.lock`, which the kernel drops when its holder dies, so a lock left
by a killed sweep is stale by construction and simply taken over. The file names the holder (pid, host, start) for
the refusal message.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from dlperf.errors import ResultsError

LOCK_NAME = ".dlperf.lock"
_held: dict[Path, int] = {}  # folder -> nesting depth in this process (a sweep's runs share its lock)


def holder(path: Path) -> str:
    """Who holds the lock, as the file says; the file may be half-written or from an older dlperf."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["since"])))
        return f"dlperf pid {int(info['pid'])} on host {info['host']!s:.64} since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another dlperf process"


@contextlib.contextmanager
def results_lock(folder: str | Path) -> Iterator[None]:
    """Hold the results folder's write lock for the block; another writer gets one ResultsError line."""
    folder = Path(folder).resolve()
    if _held.get(folder):
        _held[folder] += 1
        try:
            yield
        finally:
            _held[folder] -= 1
        return
    path = folder / LOCK_NAME
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise ResultsError(f"cannot create the lock file {path}: {error.strerror or error}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ResultsError(
                f"results folder {folder} is in use by {holder(path)}: wait for it to finish, or choose another --out"
            ) from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        _held[folder] = 1
        try:
            yield
        finally:
            del _held[folder]
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
