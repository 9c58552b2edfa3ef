"""One export of a results folder into one target at a time: two exports of the same folder at once (two CI jobs)
would each find a record not yet exported and each make its run. The second waits for the first, then finds its runs.

The lock is an advisory `flock` on a file named by the folder and the target in the machine's temporary folder: the
kernel drops it when its holder dies, so a killed export leaves nothing to clean up, and the results folder may be
read-only (an archive) or the target a remote server. The file is left in place: removing it would let a third
export lock a new file while the second still waits on the old one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dlperf.errors import ResultsError


def lock_path(folder: str | Path, target: str) -> Path:
    """The lock file of `folder` exported to `target` (a tracker's address, which may hold a password: hashed)."""
    name = hashlib.sha256(f"{Path(folder).resolve()}\0{target}".encode()).hexdigest()[:32]
    return Path(tempfile.gettempdir()) / f"dlperf-export-{name}.lock"


@contextlib.contextmanager
def export_lock(folder: str | Path, target: str) -> Iterator[None]:
    """Hold the lock of `folder` into `target` for the block, waiting for another export that holds it."""
    path = lock_path(folder, target)
    try:  # read-only: a lock file another user made (mode 0644) is still opened and locked
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError as error:
        raise ResultsError(f"cannot create the export lock {path}: {error.strerror or error}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
