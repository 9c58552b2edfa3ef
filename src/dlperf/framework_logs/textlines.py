"""Stream a log's lines with a bounded memory, refusing what is not a complete text log."""

from __future__ import annotations

import itertools
import operator
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from dlperf.errors import DataError
from dlperf.framework_logs.prefilter import Prefilter

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
MARGIN = 1 << 16  # kept past the lines handled: the lines around finds at a block's end, read with the next block
BLOCK = MAX_LINE - 2 * MARGIN  # read at once: with the margin before it, under the longest line
LINE_END = re.compile(rb"\r\n?|\n")
# bytes that change how a line reads wherever they are: NUL refuses the file; ESC and BS are taken out of a line
# (strip_prefixes), which can join a reader's string
DECORATION = ("\x00", "\x1b", "\x08")


def holding(words: Iterable[str]) -> Prefilter:
    """A prefilter of the lines holding one of `words`, or a byte that changes how a line reads."""
    return Prefilter((*words, *DECORATION))


class LogLines:
    """The lines of `path` without their line ends, one at a time (bounded memory); `unterminated` tells, once
    read, that the file's last line had no line end; `offset` is where the last line given ends in the file.

    Raises DataError for a binary file (NUL bytes or a line over 1 MiB). A last line without a line end is read: a
    log copied from an issue or a terminal often lacks the final newline. A carriage return, written (`\\r`, a
    progress bar's redraw) or printed as the two characters `^M`, ends a line too. With a `prefilter` only the
    lines it finds are given (the others change no reading), `spans()` giving each run of consecutive ones apart;
    it may be replaced while the lines are read (by one finding fewer, once the format is known).
    """

    def __init__(self, path: Path, prefilter: Prefilter | None = None) -> None:
        self.path = path
        self.prefilter = prefilter
        self.unterminated = False
        self.empty = True
        self.offset = 0
        self._stretches = self._read()

    def __iter__(self) -> Iterator[str]:
        return itertools.chain.from_iterable(lines for _, lines in self._stretches)

    def spans(self) -> Iterator[Iterator[str]]:
        """The lines as runs of consecutive lines of the file: no line of a run is next to one of another."""
        runs = itertools.groupby(self._stretches, key=operator.itemgetter(0))
        return (itertools.chain.from_iterable(lines for _, lines in run) for _, run in runs)

    def close(self) -> None:
        self._stretches.close()

    def _read(self) -> Iterator[tuple[int, Iterator[str]]]:
        """(the run it is in, its lines) for each stretch of lines given."""
        with open_regular(self.path) as f:
            buf, base, done, run, hot_to = b"", 0, 0, 0, 0  # base: buf's offset in the file; done: lines given to
            while True:
                block = f.read(BLOCK)
                buf += block
                self.empty = self.empty and not buf
                limit = _cut(buf, eof=not block)
                if not limit:
                    if not block:
                        return
                    self._check_long(buf, base)
                    continue
                spans, hot_to = self._spans(buf, limit, hot_to)
                for start, end in spans:
                    run += base + start > done
                    yield run, self._lines_of(buf[start:end], base + start)
                    done = base + end
                self.unterminated = self.unterminated or (not block and buf[-1:] not in b"\r\n")
                buf, base = buf[limit:], base + limit

    def _spans(self, buf: bytes, limit: int, hot_to: int) -> tuple[list[tuple[int, int]], int]:
        if self.prefilter is None:
            return [(0, limit)], 0
        return self.prefilter.spans(buf, limit, hot_to, MAX_LINE)

    def _lines_of(self, chunk: bytes, at: int) -> Iterator[str]:
        """The lines of `chunk`, whole lines from `at` in the file: split at once where no line needs a look of its
        own (a `\\r`, a NUL, a `^M`, a line that may be too long)."""
        text = chunk.decode("utf-8", "replace")
        if "\r" in text or "\x00" in text or CARET_M in text or len(chunk) >= MAX_LINE:
            yield from self._looked_at(chunk, at)
            return
        lines, last = text.split("\n"), at + len(chunk)
        if not lines[-1]:
            lines.pop()  # after the last line end
        for line, raw in zip(lines, chunk.split(b"\n")):
            at += len(raw) + 1
            self.offset = at if at <= last else last
            yield line

    def _looked_at(self, chunk: bytes, at: int) -> Iterator[str]:
        """The lines of `chunk`, each looked at: NUL bytes and too long lines refused, `^M`s ending lines."""
        for start, end, raw in _physical(chunk):
            self.offset = at + end
            line = raw.decode("utf-8", "replace")
            if "\x00" in line[:MAX_LINE]:
                raise DataError(f"binary content (NUL bytes) on line {self._number(at + start)}: not a text log")
            self._refuse_long(line, at + start)
            if CARET_M in line:
                yield from line.split(CARET_M)
            else:
                yield line

    def _refuse_long(self, line: str, at: int) -> None:
        if len(line) >= MAX_LINE:
            raise DataError(f"line {self._number(at)} is longer than {MAX_LINE // 1024} KiB: not a text log")

    def _check_long(self, buf: bytes, base: int) -> None:
        """A line that has no end within the buffer: refused once it holds MAX_LINE characters."""
        end = min(i for i in (buf.find(b"\n"), buf.find(b"\r"), len(buf)) if i >= 0)
        if end >= MAX_LINE:
            self._refuse_long(buf[:end].decode("utf-8", "replace"), base)

    def _number(self, offset: int) -> int:
        """The number of the line that starts at `offset`, counted again: only a refusal says it."""
        ends, last = 0, b""
        with open_regular(self.path) as f:
            while offset > 0 and (block := f.read(min(BLOCK, offset))):
                offset -= len(block)
                ends += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
                ends -= last == b"\r" and block[:1] == b"\n"
                last = block[-1:]
        return ends + 1


def _cut(buf: bytes, eof: bool) -> int:
    """Where the lines handled now end: at the last line end MARGIN before the buffer's end, whose lines after it
    are read with the next block; at the end of the file, its end; 0 where none."""
    if eof:
        return len(buf)
    end = len(buf) - MARGIN
    at = max(buf.rfind(b"\n", 0, end), buf.rfind(b"\r", 0, end)) if end > 0 else -1
    if at < 0:
        return 0
    return at + 2 if buf[at : at + 2] == b"\r\n" else at + 1


def _physical(chunk: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(start, end after its line end, text) of each line of `chunk` (ending in `\\n`, `\\r\\n` or `\\r`, or not
    at all: the file's last)."""
    start = 0
    for m in LINE_END.finditer(chunk):
        yield start, m.end(), chunk[start : m.start()]
        start = m.end()
    if start < len(chunk):
        yield start, len(chunk), chunk[start:]


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
