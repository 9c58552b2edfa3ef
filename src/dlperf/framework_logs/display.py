"""File names and log text as they may be shown: one line, no terminal escapes, always valid UTF-8.

A log's name is whatever bytes its folder holds: a newline in it would forge a line of dlperf's own output (a fake
`extracted 99 logs`), an escape sequence would reach the terminal, and bytes that are not UTF-8 cannot be written
to a JSON record at all.
"""

from __future__ import annotations

import os

from dlperf.escape import terminal


def path_text(path: str | os.PathLike[str]) -> str:
    """The path as valid UTF-8 text: bytes that are not UTF-8 become `\\xff` (what a record stores)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def shown(path: str | os.PathLike[str]) -> str:
    """How every path is printed: valid UTF-8, on one line, no terminal escapes."""
    return terminal(path_text(path))
