"""Plots a person reads: throughput from 0, speedup against the ideal line with efficiency on each point, and the
GPT layouts' throughput and TFLOP/s per report group (with scaling where a group spans device counts).

Titles say what was measured where: the group spelled out, the device type, the device counts and the hosts.
Points whose efficiency is above 100 % (superlinear) or that carry any other flag of the tables (repeats that spread
more than the CV limit, noisy runs, too few repeats, ...: reporting/doubts.py) are marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

from dlperf.escape import plot

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from dlperf.reporting.aggregate import CaseSummary, median_of  # noqa: E402

SUPERLINEAR = "eff>100%"
SWITCHES = {"compile": "torch.compile", "realdata": "real data", "channels-last": "channels-last"}
LAYOUT_SECTIONS = ("DP", "MP", "2D", "PP")


def describe_group(group: str) -> str:
    """A group code in words: `b16_fp32_compile` -> `batch 16 per device, fp32, torch.compile`;
    `DP_PP_1x1x2_8_64x2_fp32_1f1b` -> `DP_PP: dp 1 x tp 1 x pp 2, global batch 8, hidden 64 x 2 layers, fp32,
    1f1b pipeline`."""
    words = []
    for token in group.split("_"):
        if token.startswith("b") and token[1:].isdigit():
            words.append(f"batch {token[1:]} per device")
        elif token.count("x") == 2 and token.replace("x", "").isdigit():
            dp, tp, pp = token.split("x")
            words.append(f"dp {dp} x tp {tp} x pp {pp}")
        elif token.count("x") == 1 and token.replace("x", "").isdigit():
            hidden, layers = token.split("x")
            words.append(f"hidden {hidden} x {layers} layers")
        elif token.isdigit():
            words.append(f"global batch {token}")
        elif token in ("1f1b", "gpipe"):
            words.append(f"{token} pipeline")
        elif token in LAYOUT_SECTIONS or token == "PP":
            words.append(token)
        else:
            words.append(SWITCHES.get(token, token))
    prefix = [w for w in words if w in LAYOUT_SECTIONS]
    rest = [w for w in words if w not in LAYOUT_SECTIONS]
    return ("_".join(prefix) + ": " if prefix else "") + ", ".join(rest)


def where_measured(records: list[dict[str, Any]]) -> str:
    """`NVIDIA H100 80GB HBM3, 1-8 devices, host gpu01`: device type, counts and hosts of the records."""
    devices = sorted({str((r.get("ranks") or [{}])[0].get("device") or r.get("device_type") or "?") for r in records})
    counts = sorted({int(r.get("world_size") or 0) for r in records})
    hosts = sorted({h for r in records for h in (r.get("hosts") or [(r.get("env") or {}).get("host")]) if h})
    span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    host_text = f"host {hosts[0]}" if len(hosts) == 1 else f"{len(hosts)} hosts ({', '.join(hosts[:3])}...)"
    return f"{' / '.join(devices)}, {span} device{'' if span == '1' else 's'}, {host_text}"


def _case_records(cases: list[CaseSummary]) -> list[dict[str, Any]]:
    return [r for c in cases for r in c.records + c.failed]


def _marks(axis: Axes, xs: list[float], ys: list[float], cases: list[CaseSummary], efficiency: bool) -> None:
    """Efficiency labels beside points; red rings on superlinear points, orange squares on noisy ones."""
    for x, y, case in zip(xs, ys, cases):
        if efficiency and case.efficiency is not None:
            axis.annotate(f"{case.efficiency:.0%}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center")
    labels = [{flag.label for flag in c.flags()} for c in cases]  # the tables' doubt rules (reporting/doubts.py)
    superlinear = [(x, y) for x, y, found in zip(xs, ys, labels) if SUPERLINEAR in found]
    doubtful = [(x, y) for x, y, found in zip(xs, ys, labels) if found - {SUPERLINEAR}]
    if superlinear:
        axis.scatter(*zip(*superlinear), s=160, facecolors="none", edgecolors="red", label="superlinear (>100 %)")
    if doubtful:
        names = ", ".join(sorted(set().union(*labels) - {SUPERLINEAR}))
        axis.scatter(*zip(*doubtful), s=90, marker="s", facecolors="none", edgecolors="orange",
                     label=f"flagged: {names} (see report.md)")  # fmt: skip


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def scaling_figure(cases: list[CaseSummary], title: str) -> plt.Figure | None:
    """Throughput and speedup against device count; None when no case of the group has a measurement."""
    measured = [c for c in cases if c.speeds]
    if not measured:
        return None
    devices = [c.world_size for c in measured]
    medians = [c.stats["median"] for c in measured]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
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
    with_speedup = [c for c in measured if c.speedup is not None]
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
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.set_xticks(sorted({1, *devices}))
    fig.suptitle(title)
    return fig


def plot_group(cases: list[CaseSummary], title: str, path: Path) -> Path | None:
    """One PNG with throughput and speedup panels; None when no case of the group has a measurement."""
    fig = scaling_figure(cases, title)
    return None if fig is None else _save(fig, path)


def scaling_title(model: str, group: str, cases: list[CaseSummary]) -> str:
    return f"{plot(model)} {plot(describe_group(group))}\n{plot(where_measured(_case_records(cases)))}"


def layouts_figure(model: str, section: str, cases: list[CaseSummary]) -> plt.Figure | None:
    """The GPT layouts of one report group (DP, MP, 2D, PP): throughput and TFLOP/s per device per case, and
    tokens/s against devices when the group spans device counts. None when nothing was measured."""
    measured = sorted((c for c in cases if c.speeds), key=lambda c: (c.world_size, c.group))
    if not measured:
        return None
    names = [f"{c.group}\n({c.world_size} dev)" for c in measured]
    spans = len({c.world_size for c in measured}) > 1
    fig, axes = plt.subplots(1, 3 if spans else 2, figsize=(15 if spans else 11, 5.5), layout="constrained")
    speeds = [c.stats["median"] for c in measured]
    tflops = [median_of(c.records, "tflops_per_device") or 0.0 for c in measured]
    mfus = [median_of(c.records, "mfu") for c in measured]
    axes[0].bar(range(len(measured)), speeds, color="tab:blue")
    axes[0].set(ylabel="samples/s (global)", title="Throughput")
    axes[0].set_ylim(bottom=0, top=max(speeds) * 1.2)
    axes[1].bar(range(len(measured)), tflops, color="tab:green")
    axes[1].set(ylabel="TFLOP/s per device", title="Model TFLOP/s per device (MFU on bars)")
    axes[1].set_ylim(bottom=0, top=(max(tflops) or 1.0) * 1.2)
    for i, mfu in enumerate(mfus):
        label = "MFU n/a" if mfu is None else f"MFU {mfu * 100:.1f}%"
        axes[1].annotate(label, (i, tflops[i]), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    for axis in axes[:2]:
        axis.set_xticks(range(len(measured)), names, rotation=20, ha="right", fontsize=7)
        axis.grid(True, axis="y", alpha=0.3)
    if spans:
        _layout_scaling(axes[2], measured)
    fig.suptitle(f"{plot(model)} {plot(section)} layouts\n{plot(where_measured(_case_records(measured)))}")
    return fig


def _layout_scaling(axis: Axes, cases: list[CaseSummary]) -> None:
    """Samples/s against devices, the ideal line drawn from the smallest case; efficiency on each point."""
    base = cases[0]
    xs = [c.world_size for c in cases]
    ys = [c.stats["median"] for c in cases]
    per_device = base.stats["median"] / base.world_size
    axis.plot(xs, ys, "o", label="measured (efficiency on points)")
    ideal = sorted(set(xs))
    axis.plot(ideal, [per_device * x for x in ideal], "--", color="gray", label=f"ideal from {base.world_size} dev")
    for x, y in zip(xs, ys):
        axis.annotate(f"{y / (per_device * x):.0%}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center")
    axis.set(xlabel="devices", ylabel="samples/s (global)", title="Scaling")
    axis.set_ylim(bottom=0, top=max(*ys, per_device * ideal[-1]) * 1.2)
    axis.set_xticks(ideal)
    axis.grid(True, alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")


def layout_section(case: CaseSummary) -> str:
    """DP, MP, 2D or PP: the report group a GPT case's plot belongs to."""
    group = next((r.get("report_group") for r in case.records + case.failed if r.get("report_group")), case.group)
    return "PP" if group == "PP" or group.endswith("_PP") else group.split("_")[0]


def plot_layouts(model: str, section: str, cases: list[CaseSummary], path: Path) -> Path | None:
    fig = layouts_figure(model, section, cases)
    return None if fig is None else _save(fig, path)
