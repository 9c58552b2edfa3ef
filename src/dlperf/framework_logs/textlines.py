"""Stream a log's lines with a bounded memory, refusing what is not a complete text log."""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from dlperf.errors import DataError

MAX_LINE = 1 << 20  # longer "lines" mean a binary or corrupted file; never hold more than this at once


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading, refused unless it is a regular file. Opened non-blocking, then checked: a FIFO
    put in a log's place after the folder was listed must not make extract wait for a writer forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise DataError("it is not a regular file (it changed while the folder was read)")
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


UNTERMINATED = (
    "the file ends without a line end: its last line was read as it is (a posted or copied log; a run killed "
    "mid-write leaves a cut line instead)"
)
CARET_M = "^M"  # a carriage return as some terminals, editors and issue posts print it


class LogLines:
    """The lines of `path` without their line ends, one at a time (bounded memory); `unterminated` tells, once
    read, that the file's last line had no line end.

    Raises DataError for a binary file (NUL bytes or a line over 1 MiB). A last line without a line end is read: a
    log copied from an issue or a terminal often lacks the final newline. A carriage return, written (`\\r`, a
    progress bar's redraw) or printed as the two characters `^M`, ends a line too.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.unterminated = False
        self._lines = self._read()

    def __iter__(self) -> Iterator[str]:
        return self._lines

    def close(self) -> None:
        self._lines.close()

    def _read(self) -> Iterator[str]:
        with io.TextIOWrapper(open_regular(self.path), encoding="utf-8", errors="replace", newline=None) as f:
            number = 0
            while True:
                line = f.readline(MAX_LINE)
                if not line:
                    return
                number += 1
                if "\x00" in line:
                    raise DataError(f"binary content (NUL bytes) on line {number}: not a text log")
                if not line.endswith("\n"):
                    if len(line) >= MAX_LINE:
                        raise DataError(f"line {number} is longer than {MAX_LINE // 1024} KiB: not a text log")
                    self.unterminated = True
                line = line.rstrip("\n")
                if CARET_M in line:
                    yield from line.split(CARET_M)
                else:
                    yield line


def log_lines(path: Path) -> LogLines:
    """The lines of `path` (LogLines)."""
    return LogLines(path)


# What launchers and pasting put in front of a framework's own line, removed before any reader sees it:
# srun's task number (`55:  `), torchrun's `[default0]:` and `[rank0]:` tags (any number of them), a markdown
# quote (`> `) or knitr's output mark (`#> `, R Markdown), a tqdm bar that shared the line with another record
# (`...| 650/2771 [01:23<04:25,  7.98it/s]`), colour escapes.
PREFIX = re.compile(r"^(?:\s*#?>\s)?\s*(?:\d{1,6}:\s+)?(?:\[(?:default|rank)\d+\]:\s?)*")
TQDM = re.compile(r"^.*?\|\s*\d+/\d+ \[[^\]]*?(?:it/s|s/it)\]\s*")
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x08")  # colours, cursor moves, and Keras' backspaces


def strip_prefixes(line: str) -> str:
    """The framework's own line, without launcher, paste and terminal decorations."""
    if "\x1b" in line or "\x08" in line:
        line = ESCAPES.sub("", line)
    prefix = PREFIX.match(line)
    if prefix and prefix.end():
        line = line[prefix.end() :]
    if ("it/s]" in line or "s/it]" in line) and (bar := TQDM.match(line)) and bar.end() < len(line.rstrip()):
        line = line[bar.end() :]  # a bar alone on its line is kept: the tqdm reader reads it
    return line


WRAP_MIN = 40  # a terminal or a post wraps long lines at a fixed width of at least this many characters
WRAP_MAX = 1024  # ... and of at most this many: a longer line was never wrapped (nor are its neighbours its parts)
WRAP_MAX_PARTS = 12


def rejoin_wrapped(lines: Iterable[str], recognises: Callable[[str], bool]) -> Iterator[str]:
    """The lines with records that a terminal or a post wrapped at a fixed width put back together: a line that no
    format recognises, followed by lines of its very length (the width) and one no longer, is joined when the whole
    is a record `recognises`; anything else passes unchanged. Only widths a terminal or a post can have are tried,
    so each line is looked at a bounded number of times: a log of megabyte lines reads in time linear in its size."""
    source = _Pushback(lines)
    while (line := source.next()) is not None:
        if not WRAP_MIN <= len(line) <= WRAP_MAX or recognises(line):
            yield line
            continue
        parts = _wrapped_parts(line, source)
        whole = _rejoined(parts, recognises)
        if whole is not None:
            yield whole
        else:
            yield line
            source.give_back(parts[1:])


def _rejoined(parts: list[str], recognises: Callable[[str], bool]) -> str | None:
    """The record the parts were wrapped from (the first one's length is the width, the last one no longer), where
    the whole is one and its last part alone is none; else None."""
    if len(parts) < 2 or len(parts[-1]) > len(parts[0]):
        return None
    whole = "".join(parts)
    return whole if recognises(whole) and not recognises(parts[-1]) else None


class _Pushback:
    """Lines one by one; lines given back are read again first."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self._held: list[str] = []

    def next(self) -> str | None:
        return self._held.pop(0) if self._held else next(self._lines, None)

    def give_back(self, lines: list[str]) -> None:
        self._held = lines + self._held


def _wrapped_parts(line: str, source: _Pushback) -> list[str]:
    """`line` and the lines after it of its very length, up to the first of another length (at most
    WRAP_MAX_PARTS in all)."""
    parts = [line]
    while len(parts) < WRAP_MAX_PARTS and len(parts[-1]) == len(line):
        following = source.next()
        if following is None:
            break
        parts.append(following)
    return parts
