"""Which lines of a long log a reader could use, found a block at a time: a gigabyte of a framework's chatter is
passed over at the speed of a few passes over its bytes, and the per-line readers see only the lines that could
matter to them, and the lines around those.

A reader acts only on lines holding one of a few strings (its format's `clue` and `reads`, the failure words):
a line without any of them reads as if it were not there. The strings are looked for in the block's text with
its line ends (and `^M`s) taken out, so a record a terminal wrapped in the middle of one of them is found too,
and the 12 lines around each find are kept with it (rejoining a wrapped record needs its parts, 12 at most,
none longer than WRAP_MAX). The search is one numpy pass for all of them: each string is looked for at its rarest
pair of bytes in the log, and each place a pair is is checked for its whole string.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import product
from typing import Any

from dlperf.framework_logs.base import AnyCase

CONTEXT = 12  # the lines kept on each side of a find: a wrapped record's parts (textlines.WRAP_MAX_PARTS)
WRAP_BYTES = 4 * 1024 + 2  # the longest line a wrapped record's part can be (WRAP_MAX characters) with its line end
RESAMPLE = 1 << 12  # a block with more pair finds than one in this many bytes that are no word: choose pairs again
DENSE = 1 << 11  # more places to look at than one in this many bytes: words on most lines, all of them are read
SAMPLE = 64  # ... where as many of these places as hold none, the pairs are chosen again
DENSE_BLOCKS = 7  # dense blocks in a row are followed by 1, 3, then 7 blocks read whole, not looked at
Spans = list[tuple[int, int]]


def _variants(text: bytes, any_case: bool) -> list[bytes]:
    """`text`, in every case where `any_case`."""
    if not any_case:
        return [text]
    return [bytes(chars) for chars in product(*({c, *bytes([c]).swapcase()} for c in text))]


class Prefilter:
    """The lines of a log's blocks that hold one of `words` (an `AnyCase` word in any case), with their context."""

    def __init__(self, words: Iterable[str]) -> None:
        import numpy as np

        self._np = np
        found = sorted({(w.encode(), isinstance(w, AnyCase)) for w in words})
        assert found and all(w.isascii() and "^M" not in w for w in words)  # a byte pair is a character pair
        self.words = [(w, any_case) for w, any_case in found if len(w) > 1]
        self._singles = sorted({v for w, any_case in found if len(w) == 1 for v in _variants(w, any_case)})
        self._single = np.zeros(256, dtype=bool)  # a byte -> it is a one-byte word
        self._single[[v[0] for v in self._singles]] = True
        self._pairs = np.zeros(1 << 16, dtype=bool)  # a little-endian pair's code -> a word is looked for at it
        self._at: dict[int, list[tuple[int, bytes, bool]]] = {}  # a pair's code -> (its offset, word, any case)
        self._dense = self._unscanned = 0  # blocks read whole after the last dense one, and of them still to come

    def spans(self, block: bytes, limit: int, hot_to: int, longest: int) -> tuple[Spans, int]:
        """The stretches of whole lines of `block` before `limit` (a line end) the readers must see: the lines
        holding a word, CONTEXT lines around them, those before `hot_to` (the context of an earlier block's
        finds) and those of at least `longest` bytes; and how far the context of this block's finds reaches
        past `limit` (into the next block)."""
        np = self._np
        whole = [(0, limit)], len(block) - limit
        if self._unscanned:
            self._unscanned -= 1
            return whole
        found = self._found(block)
        if found is None:  # words on most lines: all of them are read, and the next blocks too (a dense log)
            self._dense = self._unscanned = min(2 * self._dense + 1, DENSE_BLOCKS)
            return whole
        self._dense = 0
        if not len(found) and limit < longest:
            return ([(0, min(hot_to, limit))] if hot_to > 0 else []), max(hot_to - limit, 0)
        ends = _line_ends(np, block)
        starts = np.concatenate(([0], ends[:-1]))
        hot = (starts < hot_to) | (ends - starts >= longest)
        reach = hot_to
        if len(found):
            lo, hi = _context(np, ends - starts, np.searchsorted(ends, found[:, 0], "right"),
                              np.searchsorted(ends, found[:, 1] - 1, "right"))  # fmt: skip
            marks = np.zeros(len(ends) + 1, dtype=np.int64)
            np.add.at(marks, lo, 1)
            np.add.at(marks, hi + 1, -1)
            hot |= np.cumsum(marks[:-1]) > 0
            reach = max(reach, int(ends[hi].max()))
        before = int(np.searchsorted(ends, limit, "right"))  # the lines that end by `limit`
        return _runs(np, hot[:before], starts, ends), max(reach - limit, 0)

    def _found(self, block: bytes) -> Any:
        """(start, end) in `block` of each word found (a wrapped one from its first byte to its last); None where
        words may be on most lines (more than one place to look at in DENSE bytes)."""
        np = self._np
        text = block.replace(b"^M", b"") if b"^" in block else block  # a two-byte search costs as much as the rest
        places = self._words_in(text.replace(b"\r", b"").replace(b"\n", b""))
        a = np.frombuffer(block, dtype=np.uint8)
        single = np.flatnonzero(self._single.take(a)) if any(b in block for b in self._singles) else []
        if places is None or len(single) > len(block) // DENSE:
            return None
        finds = np.empty((len(single) + len(places), 2), dtype=np.int64)
        finds[: len(single), 0], finds[: len(single), 1] = single, np.asarray(single) + 1
        if places:
            kept = _kept(np, block, a)  # offset in `block` of each byte of `joined`
            where = np.array(places, dtype=np.int64)
            finds[len(single) :, 0], finds[len(single) :, 1] = kept[where[:, 0]], kept[where[:, 1] - 1] + 1
        return finds

    def _words_in(self, joined: bytes) -> list[tuple[int, int]] | None:
        """(start, end) in `joined` of each word in it; None where there are too many places to look at."""
        np = self._np
        if len(joined) < 2 or not self.words:
            return []
        even = np.frombuffer(joined, dtype="<u2", count=len(joined) // 2)
        odd = np.frombuffer(joined, dtype="<u2", offset=1, count=(len(joined) - 1) // 2)
        if not self._at:
            self._choose(even, odd)
        at_even, at_odd = self._pairs.take(even), self._pairs.take(odd)
        if np.count_nonzero(at_even) + np.count_nonzero(at_odd) > len(joined) // DENSE:
            _, misses = self._checked(np.flatnonzero(at_even)[:SAMPLE] * 2, joined)
            if misses > SAMPLE // 2:  # not the words: the log's text changed, its rarest pairs are others now
                self._choose(even, odd)
            return None
        places, misses = self._checked(np.flatnonzero(at_even) * 2, joined)
        more, missed = self._checked(np.flatnonzero(at_odd) * 2 + 1, joined)
        if misses + missed > len(joined) // RESAMPLE:
            self._choose(even, odd)
        return sorted(places + more)

    def _checked(self, at: Any, joined: bytes) -> tuple[list[tuple[int, int]], int]:
        """The words whose pair starts at one of `at`, and how many of those places held none."""
        places, misses = [], 0
        for q in at.tolist():
            hit = False
            for offset, word, any_case in self._at[joined[q] | joined[q + 1] << 8]:
                start = q - offset
                piece = joined[start : start + len(word)] if start >= 0 else b""
                if piece == word or (any_case and piece.lower() == word.lower()):
                    places.append((start, start + len(word)))
                    hit = True
            misses += not hit
        return places, misses

    def _choose(self, even: Any, odd: Any) -> None:
        """Look for each word at its pair of bytes least often in this text (all its cases' for an AnyCase)."""
        np = self._np
        counts = np.bincount(even, minlength=1 << 16) + np.bincount(odd, minlength=1 << 16)
        self._pairs[:] = False
        self._at = {}
        for word, any_case in self.words:
            options = [[v[0] | v[1] << 8 for v in _variants(word[i : i + 2], any_case)] for i in range(len(word) - 1)]
            offset = min(range(len(options)), key=lambda i: sum(int(counts[c]) for c in options[i]))
            for code in options[offset]:
                self._pairs[code] = True
                self._at.setdefault(code, []).append((offset, word, any_case))


def _line_ends(np: Any, block: bytes) -> Any:
    """Where each line of `block` ends (after its line end: `\\n`, `\\r\\n` or `\\r`), the last line's end too."""
    a = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(a == 10) + 1
    if b"\r" in block:
        cr = np.flatnonzero(a == 13)
        cr = cr[(cr + 1 == len(a)) | (a[np.minimum(cr + 1, len(a) - 1)] != 10)] + 1
        ends = np.union1d(ends, cr)
    if not len(ends) or ends[-1] != len(block):
        ends = np.append(ends, len(block))
    return ends


def _context(np: Any, lengths: Any, first: Any, last: Any) -> tuple[Any, Any]:
    """The lines kept around finds on lines `first`..`last`: CONTEXT each side, up to a line too long to be a
    wrapped record's part."""
    n = len(lengths)
    index = np.arange(n)
    long = lengths > WRAP_BYTES
    before = np.concatenate(([-1], np.maximum.accumulate(np.where(long, index, -1))))  # last long one before i
    after = np.concatenate((np.minimum.accumulate(np.where(long, index, n)[::-1])[::-1], [n]))  # first at or after
    lo = np.maximum(first - CONTEXT, before[first] + 1)
    hi = np.minimum(np.minimum(last + CONTEXT, after[last + 1] - 1), n - 1)
    return lo, hi


def _kept(np: Any, block: bytes, a: Any) -> Any:
    """The offset in `block` of each byte its joined text keeps: all but line ends and `^M`s."""
    keep = (a != 10) & (a != 13)
    start = block.find(b"^M")
    while start >= 0:
        keep[start : start + 2] = False
        start = block.find(b"^M", start + 2)
    return np.flatnonzero(keep)


def _runs(np: Any, hot: Any, starts: Any, ends: Any) -> Spans:
    """The stretches of consecutive hot lines, as (start, end) offsets."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], hot.astype(np.int8), [0]))))
    return [(int(starts[a]), int(ends[b - 1])) for a, b in zip(edges[::2], edges[1::2])]
