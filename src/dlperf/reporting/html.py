"""`report.html`: one self-contained page (plotly.js inlined once, compressed) that opens from disk with no network."""

from __future__ import annotations

import base64
import gzip
import json
import time
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from dlperf import escape
from dlperf.records.parts import given
from dlperf.records.schema import RunRecord
from dlperf.records.store import write_text_atomic
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.comparison_files import (
    EXPLANATION,
    Table,
    case_table,
    environment_table,
    series_notes,
    series_points,
    summary_table,
)
from dlperf.reporting.report import tables_markdown
from dlperf.reporting.sources import Comparison, SeriesComparison
from dlperf.reporting.waterfall import measured_groups, scaling_losses
from dlperf.reporting.waterfall_plot import plotly_waterfall

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 1400px; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f0f3f7; }
table.text td, table.text th { text-align: left; }
tr.differs td { background: #fff3cd; font-weight: 600; }
tr.failed td { background: #f8d7da; }
tr.flagged td:last-child { background: #fff3cd; color: #8a4b00; font-weight: 600; }
ul.notes { font-size: 0.85rem; color: #444; }
.note { color: #555; font-size: 0.9rem; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }
"""
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
PALETTE = qualitative.Plotly


class _Plots:
    """Figures as empty divs with their data beside them as JSON; `loader` renders them all once plotly.js is
    unpacked. plotly.js (4.8 MB) is inlined gzip-compressed (2 MB in base64) and unpacked by the browser's own
    DecompressionStream: the page stays one file that opens from disk with no network, at 40 % of the size."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, fig: go.Figure) -> str:
        self.count += 1
        target = f"plot-{self.count}"
        data = fig.to_json().replace("</", "<\\/")  # a `</script>` inside a label must not end the data's tag
        return (
            f'<div class="plot"><div id="{target}" class="plotly-graph-div"></div>'
            f'<script type="application/json" class="plot-data" data-target="{target}">{data}</script></div>'
        )

    def loader(self) -> list[str]:
        """The compressed bundle and the script that unpacks it and draws every figure (nothing without figures)."""
        if not self.count:
            return []
        bundle = base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), mtime=0)).decode("ascii")
        config = json.dumps(PLOT_CONFIG)
        return [
            f'<script type="application/octet-stream" id="plotly-js-gzip">{bundle}</script>',
            "<script>",
            "(async () => {",
            "  const packed = document.getElementById('plotly-js-gzip').textContent;",
            "  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));",
            "  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));",
            "  const code = document.createElement('script');",
            "  code.textContent = await new Response(stream).text();",
            "  document.head.appendChild(code);",
            "  for (const data of document.querySelectorAll('script.plot-data')) {",
            "    const fig = JSON.parse(data.textContent);",
            f"    await Plotly.newPlot(data.dataset.target, fig.data, fig.layout, {config});",
            "  }",
            "})();",
            "</script>",
        ]


def _table(table: Table, row_classes: list[str] | None = None, css: str = "") -> str:
    header, rows = table
    out = [
        f'<table class="{css}">' if css else "<table>",
        "<thead><tr>" + "".join(f"<th>{escape.html(h)}</th>" for h in header) + "</tr></thead>",
        "<tbody>",
    ]
    for i, row in enumerate(rows):
        row_css = row_classes[i] if row_classes else ""
        attr = f' class="{row_css}"' if row_css else ""
        out.append(f"<tr{attr}>" + "".join(f"<td>{escape.html(str(c))}</td>" for c in row) + "</tr>")
    return "\n".join(out + ["</tbody></table>"])


def _series_figure(series: SeriesComparison) -> go.Figure:
    """Throughput and speedup against devices, one trace per source, the ideal line on the speedup panel."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Throughput (samples/s)", "Speedup vs own 1n1g"))
    devices = {1}
    for i, (label, points) in enumerate(series_points(series).items()):
        devices.update(p[0] for p in points)
        _add_source(fig, label, f"{label} (b{series.batches[label]})", points, PALETTE[i % len(PALETTE)])
    ideal = sorted(devices)
    fig.add_trace(
        go.Scatter(x=ideal, y=ideal, mode="lines", name="ideal (linear)", line={"dash": "dash", "color": "gray"}),
        row=1,
        col=2,
    )
    for col in (1, 2):
        fig.update_xaxes(title_text="devices", tickvals=ideal, row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)  # a ratio read from the bars' heights needs 0
    fig.update_layout(title_text=escape.html(series.key.title), height=400, margin={"t": 70, "b": 50})
    return fig


def _add_source(fig: go.Figure, label: str, title: str, points: list[tuple], color: str) -> None:
    """One source's throughput trace, and its speedup trace where it has speedups, named `title`."""
    if not points:
        return
    style = {"mode": "lines+markers", "legendgroup": label, "line": {"color": color}}
    name = escape.html(title)  # plotly reads tags in labels: <a>, <b>
    fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], name=name, **style), row=1, col=1)
    speedups = [(x, s) for x, _t, s in points if s is not None]
    if speedups:
        xy = {"x": [x for x, _ in speedups], "y": [s for _, s in speedups]}
        fig.add_trace(go.Scatter(**xy, name=name, showlegend=False, **style), row=1, col=2)


def _run_rows(records: list[RunRecord]) -> tuple[Table, list[str]]:
    header = ["case", "repeat", "status", "samples/s", "windows", "error"]
    ordered = sorted(records, key=lambda r: (int(r.world_size or 0), str(r.case), r.repeat or 0))
    rows = [_run_row(r) for r in ordered]
    return (header, rows), ["" if r.status == "ok" else "failed" for r in ordered]


def _run_row(r: RunRecord) -> list[str]:
    """A run's case, repeat, status, throughput, window count and error with its failure's facts."""
    failure = ", ".join(f"{k} {v}" for k, v in given(r.failure).items()) if r.failure else ""
    error = (r.error or "") + (" " + failure if r.failure else "")
    return [
        str(r.case),
        str(r.repeat),
        str(r.status),
        "" if not isinstance(r.throughput, (int, float)) else f"{r.throughput:.2f}",
        str(len(r.window_throughputs)) if r.window_throughputs else "",
        error.strip(),
    ]


def _windows_figure(title: str, records: list[RunRecord]) -> go.Figure | None:
    """Samples/s of every timing window of every repeat, against the iteration the window ends at."""
    fig = go.Figure()
    for r in records:
        windows = r.window_throughputs or []
        if not windows:
            continue
        every = int((r.config or {}).get("print_every") or 1)
        xs = [every * (i + 1) for i in range(len(windows))]
        fig.add_trace(
            go.Scatter(x=xs, y=windows, mode="lines+markers", name=escape.html(f"{r.case} repeat {r.repeat}"))
        )
    if not fig.data:
        return None
    fig.update_layout(
        title_text=escape.html(title),
        height=320,
        xaxis_title="timed iteration",
        yaxis_title="samples/s",
        yaxis_rangemode="tozero",
        margin={"t": 50},
    )
    return fig


def _run_details(comparison: Comparison, plots: _Plots) -> list[str]:
    parts = ["<h2>Runs</h2>"]
    for source in comparison.sources:
        parts.append(f"<h3>{escape.html(source.label)}</h3>")
        groups: dict[tuple[str, str], list[RunRecord]] = {}
        for record in source.records:
            groups.setdefault((str(record.model), str(record.group)), []).append(record)
        for (model, group), records in sorted(groups.items()):
            title = f"{model} {group}"
            parts.append(f"<h4>{escape.html(title)}</h4>")
            table, classes = _run_rows(records)
            parts.append(_table(table, classes))
            fig = _windows_figure(f"{source.label}: {title}, window throughputs", records)
            if fig is not None:
                parts.append(plots.div(fig))
    return parts


def _markdown_html(lines: list[str]) -> str:
    """report.md's tables, headings and footnotes as HTML (the subset reporting writes), so the page shows the same
    columns, flags and notes as the markdown, from the same lines."""
    out: list[str] = []
    rows: list[list[str]] = []
    items: list[str] = []

    def flush() -> None:
        if rows:
            header, *body = rows
            out.append(_table((header, body), [("flagged" if row[-1].strip() else "") for row in body]))
            rows.clear()
        if items:
            out.append('<ul class="notes">' + "".join(f"<li>{escape.html(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in lines:
        if line.startswith("|"):
            if not set(line) <= set("|-: "):  # the alignment row
                rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 1, 5)
            out.append(f"<h{level}>{escape.html(line.lstrip('# '))}</h{level}>")
        elif line.strip():
            out.append(f'<p class="note">{escape.html(line)}</p>')
    flush()
    return "\n".join(out)


def _source_tables(comparison: Comparison) -> list[str]:
    """Each source's own tables exactly as its report.md has them: every column, flag and footnote."""
    parts = ["<h2>Tables</h2>"]
    for source in comparison.sources:
        tables = tables_markdown(summarise(source.records), source.records)
        parts += [f"<h3>{escape.html(source.label)}</h3>", _markdown_html(tables)]
    return parts


def _waterfalls(comparison: Comparison, plots: _Plots) -> list[str]:
    """Each source's waterfalls of where the scaling went (the tables' section of the same name, drawn)."""
    return [
        plots.div(plotly_waterfall(f"{source.label}: {model} {group}, where the scaling went", losses))
        for source in comparison.sources
        for (model, group), losses in measured_groups(scaling_losses(summarise(source.records))).items()
    ]


def html_report(comparison: Comparison, partial: str | None = None) -> str:
    """The whole page: summary, each source's report.md tables with their flags, environment (differences
    highlighted), per-series tables and plots, every run; `partial` (a sweep not ended) said first."""
    plots = _Plots()
    labels = ", ".join(comparison.labels)
    body = [
        f"<h1>dlperf report: {escape.html(labels)}</h1>",
        f'<p class="note">Generated {escape.html(time.strftime("%Y-%m-%d %H:%M:%S %Z"))}. '
        f"{escape.html(EXPLANATION)}</p>",
        *([f"<p><strong>Partial</strong>: {escape.html(partial)}.</p>"] if partial else []),
        "<h2>Summary</h2>",
        _table(summary_table(comparison)),
        *_source_tables(comparison),
        *_waterfalls(comparison, plots),
        "<h2>Environment</h2>",
        '<p class="note">Highlighted rows differ between sources; extracted framework logs record no environment.</p>',
        _table(
            environment_table(comparison),
            ["differs" if row.differs else "" for row in comparison.environment],
            css="text",
        ),
    ]
    for series in comparison.series:
        body += [f"<h2>{escape.html(series.key.title)}</h2>", _table(case_table(series))]
        notes = series_notes(series)
        if notes:
            body.append('<ul class="notes">' + "".join(f"<li>{escape.html(n)}</li>" for n in notes) + "</ul>")
        if any(series_points(series).values()):
            body.append(plots.div(_series_figure(series)))
    body += _run_details(comparison, plots)
    body += plots.loader()
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>dlperf report: {escape.html(labels)}</title>",
            f"<style>{STYLE}</style></head><body>",
            *body,
            "</body></html>",
        ]
    )


def write_html_report(comparison: Comparison, out_dir: str | Path, partial: str | None = None) -> Path:
    path = Path(out_dir) / "report.html"
    write_text_atomic(path, html_report(comparison, partial))
    return path
