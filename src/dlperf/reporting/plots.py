"""Plots a person reads: throughput from 0, speedup against the ideal line with efficiency on each point, and the
GPT layouts' throughput and TFLOP/s per report group (with scaling where a group spans device counts).

Titles say what was measured where: the group spelled out, the device type, the device counts and the hosts.
Points whose efficiency is above 100 % (superlinear) or that carry any other flag of the tables (repeats that spread
more than the CV limit, noisy runs, too few repeats, ...: reporting/doubts.py) are marked.
"""

from __future__ import annotations

import matplotlib

from dlperf.escape import plot

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from dlperf.records.schema import RunRecord  # noqa: E402
from dlperf.reporting.aggregate import CaseSummary  # noqa: E402
from dlperf.reporting.measured_on import frameworks, where_measured  # noqa: E402
from dlperf.reporting.sources import engine_of as record_engine  # noqa: E402

SUPERLINEAR = "eff>100%"
SWITCHES = {"compile": "torch.compile", "realdata": "real data", "channels-last": "channels-last"}
LAYOUT_SECTIONS = ("DP", "MP", "2D", "PP")
# a group code's all-number tokens by how many `x`-separated numbers they hold
NUMBER_TOKENS = {1: "global batch {}", 2: "hidden {} x {} layers", 3: "dp {} x tp {} x pp {}"}


def describe_group(group: str) -> str:
    """A group code in words: `b16_fp32_compile` -> `batch 16 per device, fp32, torch.compile`;
    `DP_PP_1x1x2_8_64x2_fp32_1f1b` -> `DP_PP: dp 1 x tp 1 x pp 2, global batch 8, hidden 64 x 2 layers, fp32,
    1f1b pipeline`."""
    words = [_group_word(token) for token in group.split("_")]
    prefix = [w for w in words if w in LAYOUT_SECTIONS]
    rest = [w for w in words if w not in LAYOUT_SECTIONS]
    return ("_".join(prefix) + ": " if prefix else "") + ", ".join(rest)


def _group_word(token: str) -> str:
    """One `_`-separated token of a group code in words; a layout section or an unknown token as it is."""
    if token.startswith("b") and token[1:].isdigit():
        return f"batch {token[1:]} per device"
    if token in ("1f1b", "gpipe"):
        return f"{token} pipeline"
    numbers = token.split("x")
    if "".join(numbers).isdigit() and len(numbers) in NUMBER_TOKENS:
        return NUMBER_TOKENS[len(numbers)].format(*numbers)
    return SWITCHES.get(token, token)


def _case_records(cases: list[CaseSummary]) -> list[RunRecord]:
    return [r for c in cases for r in c.records + c.failed]


def _marks(axis: Axes, xs: list[float], ys: list[float], cases: list[CaseSummary], efficiency: bool) -> None:
    """Efficiency labels beside points; red rings on superlinear points, orange squares on noisy ones."""
    if efficiency:
        for x, y, case in zip(xs, ys, cases):
            if case.efficiency is not None:
                axis.annotate(f"{case.efficiency:.0%}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center")
    _mark_flagged(axis, xs, ys, cases)


def _mark_flagged(axis: Axes, xs: list[float], ys: list[float], cases: list[CaseSummary]) -> None:
    labels = [{flag.label for flag in c.flags()} for c in cases]  # the tables' doubt rules (reporting/doubts.py)
    superlinear = [(x, y) for x, y, found in zip(xs, ys, labels) if SUPERLINEAR in found]
    doubtful = [(x, y) for x, y, found in zip(xs, ys, labels) if found - {SUPERLINEAR}]
    if superlinear:
        axis.scatter(*zip(*superlinear), s=160, facecolors="none", edgecolors="red", label="superlinear (>100 %)")
    if doubtful:
        names = ", ".join(sorted(set().union(*labels) - {SUPERLINEAR}))
        axis.scatter(*zip(*doubtful), s=90, marker="s", facecolors="none", edgecolors="orange",
                     label=f"flagged: {names} (see report.md)")  # fmt: skip


def scaling_figure(cases: list[CaseSummary], title: str) -> plt.Figure | None:
    """Throughput and speedup against device count; None when no case of the group has a measurement."""
    measured = [c for c in cases if c.speeds]
    if not measured:
        return None
    devices = [c.world_size for c in measured]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
    _throughput_panel(left, measured)
    _speedup_panel(right, [c for c in measured if c.speedup is not None])
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.set_xticks(sorted({1, *devices}))
    fig.suptitle(title)
    return fig


def _throughput_panel(left: Axes, measured: list[CaseSummary]) -> None:
    """Median samples/s per device count from 0, with the repeats' range."""
    devices = [c.world_size for c in measured]
    medians = [c.stats["median"] for c in measured]
    left.plot(devices, medians, "o-", label="median")
    left.errorbar(
        devices,
        medians,
        yerr=[
            [m - c.stats["min"] for m, c in zip(medians, measured)],
            [c.stats["max"] - m for m, c in zip(medians, measured)],
        ],
        fmt="none",
        capsize=4,
        color="gray",
        label="min-max over repeats",
    )
    _marks(left, devices, medians, measured, efficiency=False)
    left.set(xlabel="devices", ylabel="samples/s", title="Throughput")
    left.set_ylim(bottom=0, top=max(c.stats["max"] for c in measured) * 1.15)
    left.legend(loc="lower right", fontsize="small")


def _speedup_panel(right: Axes, with_speedup: list[CaseSummary]) -> None:
    """Speedup against the ideal line, or a note where there is no 1n1g baseline."""
    if with_speedup:
        xs = [c.world_size for c in with_speedup]
        ys = [c.speedup for c in with_speedup]
        right.plot(xs, ys, "o-", label="measured (efficiency on points)")
        ideal = sorted({1, *xs})
        right.plot(ideal, ideal, "--", color="gray", label="ideal (linear)")
        _marks(right, xs, ys, with_speedup, efficiency=True)
        right.set_ylim(bottom=0, top=max(*ys, *ideal) * 1.2)
        right.legend(loc="upper left", fontsize="small")
    else:
        right.text(
            0.5, 0.5, "no 1n1g baseline:\nspeedup not computed", ha="center", va="center", transform=right.transAxes
        )
        right.set_ylim(bottom=0)
    right.set(xlabel="devices", ylabel="speedup vs 1n1g", title="Speedup")


def scaling_title(model: str, group: str, cases: list[CaseSummary]) -> str:
    records = _case_records(cases)
    framework = f"; {named}" if (named := frameworks(records)) else ""
    return f"{plot(model)} {plot(describe_group(group))}\n{plot(where_measured(records) + framework)}"


def layouts_figure(model: str, section: str, cases: list[CaseSummary]) -> plt.Figure | None:
    """The GPT layouts of one report group (DP, MP, 2D, PP): throughput and TFLOP/s per device per case, and
    tokens/s against devices when the group spans device counts. None when nothing was measured."""
    measured = sorted((c for c in cases if c.speeds), key=lambda c: (c.world_size, c.group))
    if not measured:
        return None
    spans = len({c.world_size for c in measured}) > 1
    fig, axes = plt.subplots(1, 3 if spans else 2, figsize=(15 if spans else 11, 5.5), layout="constrained")
    speeds = [c.stats["median"] for c in measured]
    axes[0].bar(range(len(measured)), speeds, color="tab:blue")
    axes[0].set(ylabel="samples/s (global)", title="Throughput")
    axes[0].set_ylim(bottom=0, top=max(speeds) * 1.2)
    _tflops_bars(axes[1], measured)
    _name_bars(axes[:2], measured)
    if spans:
        _layout_scaling(axes[2], measured)
    fig.suptitle(f"{plot(model)} {plot(section)} layouts\n{plot(where_measured(_case_records(measured)))}")
    return fig


def _name_bars(axes: list[Axes], measured: list[CaseSummary]) -> None:
    """Each bar named by its group and device count."""
    names = [f"{c.group}\n({c.world_size} dev)" for c in measured]
    for axis in axes:
        axis.set_xticks(range(len(measured)), names, rotation=20, ha="right", fontsize=7)
        axis.grid(True, axis="y", alpha=0.3)


def _tflops_bars(axis: Axes, measured: list[CaseSummary]) -> None:
    """Model TFLOP/s per device per case, its MFU written on the bar."""
    tflops = [c.median(lambda r: r.tflops_per_device) or 0.0 for c in measured]
    axis.bar(range(len(measured)), tflops, color="tab:green")
    axis.set(ylabel="TFLOP/s per device", title="Model TFLOP/s per device (MFU on bars)")
    axis.set_ylim(bottom=0, top=(max(tflops) or 1.0) * 1.2)
    for i, mfu in enumerate(c.median(lambda r: r.mfu) for c in measured):
        label = "MFU n/a" if mfu is None else f"MFU {mfu * 100:.1f}%"
        axis.annotate(label, (i, tflops[i]), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)


def engine_of(case: CaseSummary) -> str:
    """The engine(s) a case's records ran on (`torch`, `jax`, an external label's framework): a scaling line joins
    one engine's points only."""
    engines = sorted({record_engine(r) for r in case.records + case.failed})
    return "+".join(engines) or "torch"


def _layout_scaling(axis: Axes, cases: list[CaseSummary]) -> None:
    """Samples/s against devices, one series per engine, each with its ideal line drawn from its own smallest case
    and its efficiency on each point (another engine's points never sit on a line drawn from torch's baseline)."""
    by_engine: dict[str, list[CaseSummary]] = {}
    for case in cases:
        by_engine.setdefault(engine_of(case), []).append(case)
    several = len(by_engine) > 1
    tops: list[float] = []
    for color, (engine, series) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], sorted(by_engine.items())):
        base = min(series, key=lambda c: c.world_size)
        xs = [c.world_size for c in series]
        ys = [c.stats["median"] for c in series]
        per_device = base.stats["median"] / base.world_size
        name = f"{engine}: " if several else ""
        axis.plot(xs, ys, "o", color=color, label=f"{name}measured (efficiency on points)")
        ideal = sorted(set(xs))
        axis.plot(
            ideal, [per_device * x for x in ideal], "--", color=color, alpha=0.6,
            label=f"{name}ideal from {base.world_size} dev",
        )  # fmt: skip
        for x, y in zip(xs, ys):
            axis.annotate(f"{y / (per_device * x):.0%}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center")
        tops += [*ys, per_device * ideal[-1]]
    axis.set(xlabel="devices", ylabel="samples/s (global)", title="Scaling")
    axis.set_ylim(bottom=0, top=max(tops) * 1.2)
    axis.set_xticks(sorted({c.world_size for c in cases}))
    axis.grid(True, alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")


def layout_section(case: CaseSummary) -> str:
    """DP, MP, 2D or PP: the report group a GPT case's plot belongs to."""
    group = next((r.report_group for r in case.records + case.failed if r.report_group), case.group)
    return "PP" if group == "PP" or group.endswith("_PP") else group.split("_")[0]
