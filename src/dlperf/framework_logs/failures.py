"""How a log says its run failed: a crash, out of memory, a traceback, a signal, or a NaN loss.

A failure marker counts only when no training line follows it: libraries print warnings that look alike
(torch's allocator prints `... failed with OOM` while training goes on), but a run that prints progress after
them did not die of them. A NaN loss fails the run wherever it appears: training has diverged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# (reason, pattern) from the most to the least specific: the reason names the first class that matched.
MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("out of memory", re.compile(r"out of memory|OutOfMemoryError|\bOOM\b|RESOURCE_EXHAUSTED", re.IGNORECASE)),
    ("error", re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): \S")),
    ("killed by a signal", re.compile(r"Signal \d+ \(SIG[A-Z]+\)|exitcode\s*:\s*-\d+|Segmentation fault|\bKilled\b")),
    ("traceback", re.compile(r"Traceback \(most recent call last\)|ChildFailedError")),
)
# Every marker holds one of these words: one literal scan rules out almost every line before the markers' regexes.
MARKER_WORDS = ("f memory", "F MEMORY", "OutOfMemory", "OOM", "RESOURCE_EX", "Signal", "exitcode", "Segmentation",
                "Killed", "Error", "Exception", "Traceback")  # fmt: skip
KEYWORDS = re.compile("|".join(MARKER_WORDS))
NAN_WORDS = ("nan", "NaN")  # a NaN loss's line holds one
WORDS = (*MARKER_WORDS, *NAN_WORDS)  # a line holding none says nothing of how the run ended
# `loss: nan`, `loss=nan`, and dlperf's own `loss nan` (a space, no sign between)
NAN_LOSS = re.compile(r"\bloss\b(?:[^|,]{0,40}?[:=]\s*|\s+)[-+]?nan\b", re.IGNORECASE)


def _nan_loss(line: str) -> bool:
    return any(word in line for word in NAN_WORDS) and NAN_LOSS.search(line) is not None


class FailureWatch:
    """Passes lines through while noting failure markers; `progress()` is called for every training line."""

    def __init__(self) -> None:
        self._pending: dict[str, str] = {}  # reason -> the first line that showed it since the last progress
        self.nan_line: str | None = None
        self.success: re.Pattern[str] | None = None  # the format's "ended well" line (MLPerf's run_stop success)
        self.ended_well = False

    def watch(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            self._note(line)
            yield line

    def _note(self, line: str) -> None:
        """What the line says of the run's end: it ended well, a NaN loss, a failure marker."""
        if self.ended_well or self._ends_well(line):  # after it, exit noise (multiprocessing's tracebacks)
            return
        if self.nan_line is None and _nan_loss(line):
            self.nan_line = line
        if KEYWORDS.search(line):
            self._pending.update(
                (reason, line) for reason, pattern in MARKERS if reason not in self._pending and pattern.search(line)
            )

    def _ends_well(self, line: str) -> bool:
        """The format's line saying the run ended well: the failure markers seen so far were not the run's end."""
        if self.success is None or not self.success.search(line):
            return False
        self.ended_well = True
        self._pending.clear()
        return True

    def progress(self) -> None:
        self._pending.clear()

    def reason(self) -> str | None:
        """Why the run failed, with the line that says so; None for a run that ended well."""
        if self.nan_line is not None:
            return f"NaN loss: {self.nan_line.strip()[:160]}"
        for reason, _ in MARKERS:
            if reason in self._pending:
                return f"{reason}: {self._pending[reason].strip()[:160]}"
        return None
