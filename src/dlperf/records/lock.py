"""One writer per results folder: two sweeps on the same --out would interleave logs and replace each other's
records, measuring while the other ran. Readers (report, compare) take no lock and are never refused.

The lock is an advisory `flock` on `OUT/.dlperf.lock`, which the kernel drops when its holder dies, so a lock left
by a killed sweep is stale by construction and simply taken over; a holder that finishes removes the file, and one
that takes it removes what a killed writer left half-written. The file names the holder (pid, host, start) for
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
from dlperf.records.store import stale_temporaries

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


def writer_of(folder: str | Path) -> str | None:
    """Who is writing `folder` now (`holder`), or None where no one holds its lock; takes nothing."""
    path = Path(folder) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder(path)
    finally:
        os.close(fd)  # closing the descriptor drops a shared lock taken here
    return None


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
    fd = _locked_fd(folder, path)
    if fd is None:  # the holder started us to write on its behalf (an sbatch job): its lock covers us
        yield
        return
    try:
        token = uuid.uuid4().hex
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "token": token}
        try:
            os.pwrite(fd, json.dumps(info).encode(), 0)
        except OSError as error:
            raise ResultsError(
                f"cannot write the lock file {path}: {error.strerror or error}: free space under {folder}, or "
                "choose another --out"
            ) from None
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
    finally:
        path.unlink(missing_ok=True)  # still held: a finished folder keeps no lock file (see _locked_fd)
        os.close(fd)  # closing the descriptor releases the flock


def _locked_fd(folder: Path, path: Path) -> int | None:
    """A descriptor of `path` holding its flock; None where the holder's token says it started this process; one
    ResultsError line where another writer holds it. The holder removes the file before it lets go, so a file
    opened before that removal and locked after it is no longer the lock: checked by inode, and opened again."""
    while True:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise ResultsError(f"cannot create the lock file {path}: {error.strerror or error}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if os.environ.get(TOKEN_ENV) and os.environ.get(TOKEN_ENV) == _token(path):
                return None
            raise ResultsError(
                f"results folder {folder} is in use by {holder(path)}: wait for it to finish, or choose another --out"
            ) from None
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            os.ftruncate(fd, 0)
            for leftover in stale_temporaries(folder):  # a killed writer's half-written files: no one writes now
                leftover.unlink(missing_ok=True)
            return fd
        os.close(fd)  # removed by its last holder between our open and our lock: take the new file
