"""One writer per results folder: two sweeps on the same --out would interleave logs and replace each other's
records, measuring while the other ran. Readers (report, compare) take no lock and are never refused.

The lock is an advisory `flock` on `OUT/.dlperf.lock`, which the kernel drops when its holder dies, so a lock left
by a killed sweep is stale by construction and simply taken over. The file names the holder (pid, host, start) for
the refusal message, and a random token that the holder exports to its children (DLPERF_LOCK_TOKEN): a `dlperf run`
started on the holder's behalf (an sbatch job's runs) writes under the holder's lock instead of being refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from dlperf.errors import ResultsError

LOCK_NAME = ".dlperf.lock"
TOKEN_ENV = "DLPERF_LOCK_TOKEN"
_held: dict[Path, int] = {}  # folder -> nesting depth in this process (a sweep's runs share its lock)


def _token(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["token"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
            if os.environ.get(TOKEN_ENV) and os.environ.get(TOKEN_ENV) == _token(path):
                yield  # the holder started us to write on its behalf (an sbatch job): its lock covers us
                return
            raise ResultsError(
                f"results folder {folder} is in use by {holder(path)}: wait for it to finish, or choose another --out"
            ) from None
        token = uuid.uuid4().hex
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "token": token}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        _held[folder] = 1
        inherited = os.environ.get(TOKEN_ENV)
        os.environ[TOKEN_ENV] = token  # children (sbatch and its jobs) may write under this lock
        try:
            yield
        finally:
            del _held[folder]
            if inherited is None:
                os.environ.pop(TOKEN_ENV, None)
            else:
                os.environ[TOKEN_ENV] = inherited
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
