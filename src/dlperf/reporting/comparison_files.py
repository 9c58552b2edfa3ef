"""A comparison of several results folders (sources.py) as files: its tables, markdown, JSON and plots, and
`write_comparison`, which writes the formats asked for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf.escape import markdown as md
from dlperf.escape import plot
from dlperf.records.store import write_json_atomic, write_text_atomic
from dlperf.reporting import markdown
from dlperf.reporting.aggregate import number_text, summarise
from dlperf.reporting.figures import save_figure
from dlperf.reporting.report import tables_markdown
from dlperf.reporting.sources import Cell, Comparison, SeriesComparison
from dlperf.wording import count

if TYPE_CHECKING:
    from matplotlib.axes import Axes

EXPLANATION = (
    "samples/s is the median over repeats of global throughput; speedup is against each source's own 1n1g median; "
    "the summary shows each series at the largest topology every source measured, at the largest batch size per "
    "device they share (else each source's largest)."
)


Table = tuple[list[str], list[list[str]]]  # header, rows of formatted cells


def summary_table(comparison: Comparison) -> Table:
    """The published shape: one row per source; per series throughput and speedup at the largest common case."""
    header = ["source"]
    for series in comparison.series:
        header += _summary_head(series)
    rows = [
        [label, *(cell for series in comparison.series for cell in _summary_cells(series, label))]
        for label in comparison.labels
    ]
    return header, rows


def _summary_head(series: SeriesComparison) -> list[str]:
    """A series' summary columns: at the largest common case, the largest batch where any source found one."""
    common = series.common_case
    where = f"{count(series.world_size(common), 'device')} ({common})" if common else "no common topology"
    largest = ["largest batch"] if any(series.max_batches.values()) else []
    return [f"{series.key.title} samples/s, {where}", "speedup", "batch", *largest, "flags"]


def _summary_cells(series: SeriesComparison, label: str) -> list[str]:
    """One source's cells under `_summary_head`."""
    common = series.common_case
    cell = series.cell(label, common) if common and label in series.batches else None
    batch = str(series.batches[label]) if label in series.batches else ""
    cells = [number_text(cell.throughput if cell else None), number_text(cell.speedup if cell else None), batch]
    if any(series.max_batches.values()):
        known = series.max_batches.get(label)
        cells.append("" if known is None else str(known))
    return [*cells, cell.labels if cell else ""]


def case_table(series: SeriesComparison) -> Table:
    """One series: every case, one throughput column per source, then each source's ratio to the first."""
    first = series.labels[0]
    header = ["case", "devices"]
    header += [f"{lbl} samples/s (b{series.batches[lbl]})" for lbl in series.labels]
    header += [f"{lbl} / {first}" for lbl in series.labels[1:]]
    header += [f"{lbl} flags" for lbl in series.labels]
    return header, [_case_cells(series, name) for name in series.case_order]


def _case_cells(series: SeriesComparison, name: str) -> list[str]:
    """One case's row of `case_table`."""
    cells = [series.cell(lbl, name) for lbl in series.labels]
    ratios = series.ratios(name)
    row = [name, str(series.world_size(name))]
    row += [number_text(c.throughput if c else None) for c in cells]
    row += [number_text(ratios[lbl], ".3f") for lbl in series.labels[1:]]
    return row + [c.labels if c else "" for c in cells]


def series_notes(series: SeriesComparison) -> list[str]:
    """The footnote of every flag in a series' table: source, case, label, what was seen and what to do."""
    notes = []
    for name in series.case_order:
        for label in series.labels:
            cell = series.cell(label, name)
            notes += [f"{label} {name} [{flag.label}]: {flag.note}" for flag in (cell.flags if cell else ())]
    return notes


def environment_table(comparison: Comparison) -> Table:
    rows = [[row.fact, *(row.values[lbl] or "" for lbl in comparison.labels)] for row in comparison.environment]
    return ["fact", *comparison.labels], rows


def markdown_table(table: Table, marked: Sequence[bool] = (), numeric: bool = True) -> list[str]:
    """A markdown table, first column left-aligned, the others right-aligned when `numeric`; a marked row's first
    cell is bold and says `(differs)`."""
    header, rows = table
    rows = [
        [f"**{row[0]}** (differs)", *row[1:]] if i < len(marked) and marked[i] else row for i, row in enumerate(rows)
    ]
    return markdown.table(header, rows, "l" + ("r" if numeric else "l") * (len(header) - 1))


def comparison_markdown(comparison: Comparison) -> str:
    lines = [
        "# dlperf cross-source report",
        "",
        f"Sources: {', '.join(md(label) for label in comparison.labels)}. {EXPLANATION}",
        "",
        "## Summary",
        "",
        *markdown_table(summary_table(comparison)),
        "",
        "## Environment",
        "",
        *markdown_table(environment_table(comparison), [row.differs for row in comparison.environment], numeric=False),
        "",
    ]
    for series in comparison.series:
        lines += [f"## {md(series.key.title)}", "", *markdown_table(case_table(series)), ""]
        notes = series_notes(series)
        lines += [f"- {md(note)}" for note in notes] + ([""] if notes else [])
    return "\n".join(lines + source_tables_markdown(comparison))


def source_tables_markdown(comparison: Comparison) -> list[str]:
    """Each source's own report.md tables (published shape, efficiency, CV, latency, memory, flags, footnotes),
    their headings one level down under the source's name."""
    lines = ["## Each source's tables", ""]
    for source in comparison.sources:
        lines += [f"### {md(source.label)}", ""]
        for line in tables_markdown(summarise(source.records), source.records):
            lines.append("##" + line if line.startswith("#") else line)
    return lines


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """The same figures as the markdown, for scripts: per series the common case and every source's cells."""
    out: dict[str, Any] = {"sources": comparison.labels, "series": [], "environment": {}}
    for series in comparison.series:
        cases = {}
        for name in series.case_order:
            cases[name] = {
                "world_size": series.world_size(name),
                "sources": {lbl: _cell_json(series.cell(lbl, name)) for lbl in series.labels},
                "ratio_to_first": series.ratios(name),
            }
        out["series"].append(
            {
                "model": series.key.model,
                "variant": series.key.variant,
                "common_case": series.common_case,
                "batch_size": series.batches,
                "max_batch": series.max_batches,
                "cases": cases,
            }
        )
    for row in comparison.environment:
        out["environment"][row.fact] = {"values": row.values, "differs": row.differs}
    return out


def _cell_json(cell: Cell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {
        "median_speed": None if cell.throughput is None else round(cell.throughput, 2),
        "speedup": cell.speedup,
        "batch_size_per_device": cell.batch_size,
        "repeats": cell.repeats,
        "failed_repeats": cell.failed,
        "flags": [flag.label for flag in cell.flags],
        "flag_notes": [flag.note for flag in cell.flags],
    }


def plot_series(series: SeriesComparison, path: Path) -> Path | None:
    """Throughput and speedup against devices, one line per source, with the ideal line; None if nothing measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = series_points(series)
    if not any(points for points in lines.values()):
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    devices: set[int] = {1}
    for label, points in lines.items():
        if points:
            _plot_source(left, right, points, label, series.batches[label])
            devices.update(p[0] for p in points)
    ideal = sorted(devices)
    right.plot(ideal, ideal, "--", color="gray", label="ideal (linear)")
    left.set(xlabel="devices", ylabel="samples/s", title="Throughput")
    right.set(xlabel="devices", ylabel="speedup vs own 1n1g", title="Speedup")
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.set_xticks(ideal)
        axis.legend()
    fig.suptitle(plot(series.key.title))
    fig.tight_layout()
    return save_figure(fig, path)


def _plot_source(
    left: Axes, right: Axes, points: list[tuple[int, float, float | None]], label: str, batch: int
) -> None:
    """One source's throughput line, and its speedup line where it has speedups."""
    left.plot([p[0] for p in points], [p[1] for p in points], "o-", label=plot(f"{label} (b{batch})"))
    with_speedup = [(x, s) for x, _t, s in points if s is not None]
    if with_speedup:
        right.plot([x for x, _ in with_speedup], [s for _, s in with_speedup], "o-", label=plot(label))


def series_points(series: SeriesComparison) -> dict[str, list[tuple[int, float, float | None]]]:
    """Per source, (devices, median samples/s, speedup) of every measured case, by devices."""
    out: dict[str, list[tuple[int, float, float | None]]] = {}
    for label in series.labels:
        points = []
        for name in series.case_order:
            cell = series.cell(label, name)
            if cell and cell.throughput is not None:
                points.append((series.world_size(name), cell.throughput, cell.speedup))
        out[label] = points
    return out


def write_comparison(comparison: Comparison, out_dir: str | Path, formats: set[str]) -> list[Path]:
    """report.md, summary.json and plots/compare_<series>.png (whichever of md, json, png are asked for)."""
    out = Path(out_dir)
    written: list[Path] = []
    if "json" in formats:
        write_json_atomic(out / "summary.json", comparison_json(comparison))
        written.append(out / "summary.json")
    if "md" in formats:
        write_text_atomic(out / "report.md", comparison_markdown(comparison))
        written.append(out / "report.md")
    if "png" in formats:
        for series in comparison.series:
            path = plot_series(series, out / "plots" / f"compare_{series.key.slug}.png")
            if path:
                written.append(path)
    return written
