"""Long lines are read in time linear in their length: the wrapped-record rejoining looks at each line a bounded
number of times, whatever its length (benchmarks/extract_speed.py --lines 150 --line-mb 1 prints the times)."""

from __future__ import annotations

import contextlib
import functools
import re
from contextlib import closing
from pathlib import Path

import pytest

from dlperf.errors import DataError
from dlperf.framework_logs.base import InOrder
from dlperf.framework_logs.registry import FORMATS, detect
from dlperf.framework_logs.textlines import LogLines, rejoin_wrapped, strip_prefixes

FIXTURES = Path(__file__).parent.parent / "fixtures" / "peer-logs"


class CountingRecogniser:
    """A recogniser that counts the characters it was shown: the work detection does is linear in them."""

    def __init__(self) -> None:
        self.calls = self.chars = 0

    def __call__(self, text: str) -> bool:
        self.calls += 1
        self.chars += len(text)
        return detect(strip_prefixes(text)) is not None


def _rejoined(lines: list[str]) -> tuple[list[str], CountingRecogniser]:
    recognises = CountingRecogniser()
    return list(rejoin_wrapped(lines, recognises)), recognises


def test_long_lines_of_one_length_are_not_joined_or_looked_at_again():
    lines = [("x" * 99 + " ") * 1000 for _ in range(30)]  # 100,000 characters each, the same length
    out, recognises = _rejoined(lines)
    assert out == lines
    assert recognises.chars <= sum(map(len, lines))  # the old rejoining showed it up to 12 lines at once: 12 x


def test_a_short_line_before_long_ones_is_not_joined_to_them():
    lines = [("a" * 79 + " ") * 1 if i % 2 == 0 else "y" * 100_000 for i in range(20)]
    out, recognises = _rejoined(lines)
    assert out == lines
    assert recognises.chars <= 2 * sum(len(line) for line in lines if len(line) < 1000)


def test_a_record_wrapped_at_a_terminal_width_is_still_put_back_together():
    record = (
        " iteration       10/     100 | consumed samples:          640 | elapsed time per iteration (ms): 812.4 | "
        "learning rate: 1.500000E-05 | global batch size:    64 | lm loss: 8.123456E+00 | loss scale: 1.0 |"
    )
    parts = [record[i : i + 80] for i in range(0, len(record), 80)]
    out, _ = _rejoined(["y" * 100_000, *parts, "y" * 100_000])
    assert out == ["y" * 100_000, record, "y" * 100_000]


@functools.cache
def _fixture_lines() -> tuple[str, ...]:
    return tuple(line for path in sorted(FIXTURES.rglob("*.log")) for line in _lines(path))


def _lines(path: Path) -> list[str]:
    with contextlib.suppress(DataError), closing(LogLines(path)) as lines:
        return [strip_prefixes(line) for line in lines]
    return []  # a fixture that is no text log on purpose


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.clue], ids=lambda f: f.name)
def test_a_clue_is_on_every_fixture_line_the_signature_matches(fmt):
    """A format's clue is a literal scan before its signature: it must never hide a line the signature matches."""
    matched = [line for line in _fixture_lines() if fmt.signature.search(line)]
    assert matched
    assert all(any(clue in line for clue in fmt.clue) for line in matched)
    assert all(fmt.recognises(line) for line in matched)


IN_ORDER = [f for f in FORMATS if isinstance(f.signature, InOrder)]


@pytest.mark.parametrize("fmt", IN_ORDER, ids=lambda f: f.name)
def test_a_signature_searched_in_parts_says_what_its_one_regex_says(fmt):
    """InOrder finds each part after the one before, once: on a record, a record's start repeated without its end,
    and the end before the start, it answers as the regex `pattern` (which tries every start) does."""
    regex = re.compile(fmt.signature.pattern)
    records = [line for line in _fixture_lines() if fmt.signature.search(line)][:20]
    assert records
    for record in records:
        middle = len(record) // 2
        for line in (record, record[:middle] * 50, record[middle:] + " " + record[:middle], "x" * 50 + record):
            assert (fmt.signature.search(line) is not None) == (regex.search(line) is not None)
