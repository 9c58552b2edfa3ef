"""Throughput and speedup against device count, with the ideal linear-scaling line."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dlperf.reporting.aggregate import CaseSummary  # noqa: E402


def plot_group(cases: list[CaseSummary], title: str, path: Path) -> Path | None:
    """One PNG with two panels; None when no case of the group has a measurement."""
    measured = [c for c in cases if c.speeds]
    if not measured:
        return None
    devices = [c.world_size for c in measured]
    medians = [c.stats["median"] for c in measured]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
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
    left.set(xlabel="devices", ylabel="samples/s", title="Throughput")
    left.legend()
    with_speedup = [c for c in measured if c.speedup is not None]
    if with_speedup:
        xs = [c.world_size for c in with_speedup]
        right.plot(xs, [c.speedup for c in with_speedup], "o-", label="measured")
        ideal = sorted({1, *xs})
        right.plot(ideal, ideal, "--", color="gray", label="ideal (linear)")
        right.legend()
    else:
        right.text(0.5, 0.5, "no 1n1g baseline: speedup not computed", ha="center", va="center")
    right.set(xlabel="devices", ylabel="speedup vs 1n1g", title="Speedup")
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.set_xticks(sorted({1, *devices}))
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
