"""The reports' one markdown table writer: its exact lines, alignment and escaping."""

from __future__ import annotations

import pytest

from dlperf.reporting.markdown import table


def test_table_lines_alignment_and_empty_cells():
    assert table(["case", "samples/s", "note"], [["1n1g", 100.5, ""], ["2n1g", "", "x"]], "lr") == [
        "| case | samples/s | note |",
        "|---|---:|---|",
        "| 1n1g | 100.5 |  |",
        "| 2n1g |  | x |",
    ]


def test_table_cells_escaped_so_no_cell_or_row_ends_early():
    lines = table(["a|b"], [["x|y\nz"]])
    assert lines == ["| a\\|b |", "|---|", "| x\\|y\\nz |"]


def test_table_refuses_an_unknown_alignment():
    with pytest.raises(ValueError, match="l and r"):
        table(["a"], [], "c")
