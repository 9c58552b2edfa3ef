"""Files a user names on the command line (a sweep file, a hostfile, a record to predict from), read safely.

Opened non-blocking and checked before reading: a FIFO in a file's place would wait for a writer forever, a
device such as /dev/zero would never end. Bounded in size: a file far larger than any such file is the wrong one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dlperf.errors import ConfigError
from dlperf.escape import terminal

MAX_BYTES = 64 * 2**20


def read_user_file(path: str | Path, what: str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file `path` (`what` names it in the one-line ConfigError otherwise)."""
    shown = f"{what} {terminal(os.fsdecode(path))}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise ConfigError(f"cannot read {shown}: {error.strerror or error}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{shown} is not a regular file (a FIFO, device or folder): give a file")
    with open(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as error:
            raise ConfigError(f"cannot read {shown}: {error.strerror or error}") from None
    if len(data) > limit:
        raise ConfigError(f"{shown} is larger than {limit // 1024} KiB: is it the right file?")
    return data


def read_user_text(path: str | Path, what: str, limit: int = MAX_BYTES) -> str:
    """`read_user_file` as UTF-8 text."""
    try:
        return read_user_file(path, what, limit).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{what} {terminal(os.fsdecode(path))} is not UTF-8 text (byte {error.start})") from None
