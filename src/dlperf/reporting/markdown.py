"""The one markdown table writer of the reports: header, alignment row and rows, every cell escaped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dlperf.escape import markdown

_RULE = {"l": "---", "r": "---:"}


def table(headers: Sequence[object], rows: Iterable[Sequence[object]], align: str = "") -> list[str]:
    """A markdown table's lines. `align` has a letter per column, `l` (left, the default for a missing letter) or
    `r` (right, for numbers). Each cell is escaped (`escape.markdown`): text from a record or a label, with a `|` or
    a newline in it, ends no cell and no row."""
    return [*header(headers, align), *(row(cells) for cells in rows)]


def header(headers: Sequence[object], align: str = "") -> list[str]:
    """The header and alignment lines alone, for a table whose rows are printed as they come (maxbatch's probes)."""
    if set(align) - set(_RULE):
        raise ValueError(f"align takes l and r only, got {align!r}")
    rules = [_RULE[a] for a in align.ljust(len(headers), "l")]
    return [row(headers), "|" + "|".join(rules) + "|"]


def row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(markdown(cell) for cell in cells) + " |"
