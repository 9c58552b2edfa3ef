"""The waterfall of where the scaling went (reporting/waterfall.py), drawn: a PNG per group for the report's plots
and a plotly figure for report.html. Each case falls from its ideal through its measured parts to its measured
throughput; a negative part (faster than one device there) rises."""

from __future__ import annotations

import textwrap
from typing import Any

from dlperf.escape import plot as plot_text
from dlperf.reporting.waterfall import LABELS, UNEXPLAINED, ScalingLoss
from dlperf.wording import count

COLORS = {
    "exposed_communication": "#d62728",
    "straggler_wait": "#ff7f0e",
    "data_stall": "#9467bd",
    "compute_slowdown": "#8c564b",
    "host_overhead": "#e377c2",
    "overlapped_communication": "#ff9896",
    "communication": "#d62728",
    "machine_sharing": "#8c564b",
    UNEXPLAINED: "#7f7f7f",
}


TITLE_CHARS = 48  # a title line's characters that fit one 5.5-inch panel at 9-10 pt: longer ones wrap, not cut


def steps(loss: ScalingLoss) -> list[tuple[str, float, float, str]]:
    """(label, bottom, height, color) of each bar, ideal first and measured last, heights in samples/s."""
    bars = [("ideal", 0.0, loss.ideal, "#2ca02c")]
    level = loss.ideal
    for name, value in loss.components.items():
        bars.append((LABELS[name], level - value, value, COLORS[name]))
        level -= value
    return bars + [("measured", 0.0, loss.measured, "#1f77b4")]


def _title(loss: ScalingLoss) -> str:
    verb = "lost" if loss.measured_loss >= 0 else "gained (superlinear)"
    share = f" ({abs(loss.measured_loss) / loss.ideal:.0%} of ideal)" if loss.ideal > 0 else ""
    split = "" if loss.split_measured or loss.note else "; split not measured (no ablation)"
    return f"{loss.case}: {count(loss.devices, 'device')}, {verb} {abs(loss.measured_loss):.1f} samples/s{share}{split}"


def waterfall_figure(model: str, group: str, losses: list[ScalingLoss]) -> Any:
    """The group's waterfall for the report's plots: one panel per case, its titles wrapped to their panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(losses), figsize=(min(5.5 * len(losses), 22), 4.8), squeeze=False)
    for axis, loss in zip(axes[0], losses):
        bars = steps(loss)
        xs = range(len(bars))
        axis.bar(xs, [h for _, _, h, _ in bars], bottom=[b for _, b, _, _ in bars], color=[c for *_, c in bars])
        for x, (_, bottom, height, _) in zip(xs, bars):
            axis.annotate(f"{height:.1f}", (x, max(bottom, bottom + height)), ha="center", va="bottom", fontsize=7)
        axis.set_xticks(list(xs), [plot_text(label) for label, *_ in bars], rotation=35, ha="right", fontsize=8)
        axis.set_ylabel("samples/s")
        axis.set_ylim(bottom=min(0.0, *(b for _, b, _, _ in bars)))
        axis.set_title(_wrapped(_title(loss), TITLE_CHARS), fontsize=9)
        if loss.note:
            axis.text(0.5, 0.5, "parts not measured", transform=axis.transAxes, ha="center", color="#555")
    heading = f"{model} {group}: where the scaling went (ideal = devices x the 1-device run)"
    fig.suptitle(_wrapped(heading, TITLE_CHARS * len(losses)), fontsize=10)
    fig.tight_layout()
    return fig


def _wrapped(text: str, width: int) -> str:
    """`text` in lines of at most `width` characters, each escaped for matplotlib (which would show an escaped
    line break as is)."""
    return "\n".join(plot_text(line) for line in textwrap.wrap(text, width))


def plotly_waterfall(title: str, losses: list[ScalingLoss]) -> Any:
    """report.html's figure: one waterfall trace per case, side by side."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from dlperf import escape

    fig = make_subplots(rows=1, cols=len(losses), subplot_titles=[escape.html(_title(x)) for x in losses])
    for col, loss in enumerate(losses, start=1):
        labels = ["ideal", *(LABELS[name] for name in loss.components), "measured"]
        values = [loss.ideal, *(-value for value in loss.components.values()), loss.measured]
        measures = ["absolute", *(["relative"] * len(loss.components)), "total"]
        fig.add_trace(
            go.Waterfall(x=labels, y=values, measure=measures, name=escape.html(loss.case), showlegend=False),
            row=1,
            col=col,
        )
    fig.update_layout(title_text=escape.html(title), height=420, margin={"t": 80, "b": 90})
    fig.update_yaxes(title_text="samples/s", row=1, col=1)
    return fig
