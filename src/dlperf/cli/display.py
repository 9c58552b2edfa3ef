"""What the terminal shows of a run: one line while sweeping, a small table after `dlperf run`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(stderr=False, highlight=False)


def run_line(record: dict[str, Any]) -> str:
    head = f"{record['model']} {record['case']} {record['group']} #{record['repeat']}"
    if record["status"] != "ok":
        return f"{head}: FAILED: {record.get('error')}"
    latency = record.get("latency_ms") or {}
    if "p50" in latency:
        return f"{head}: {record['throughput']:.2f} samples/s, {latency['p50']:.1f} ms/iter (p50)"
    return f"{head}: {record['throughput']:.2f} samples/s"  # an external run's log may print no step time


def show_record(record: dict[str, Any], path: str) -> None:
    table = Table(title=f"{record['model']} {record['case']} {record['group']} repeat {record['repeat']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    if record.get("engine") == "external":
        show_external(record, path)
        return
    rows: list[tuple[str, str]] = [
        ("throughput (samples/s)", f"{record['throughput']:.2f}"),
        ("per device (samples/s)", f"{record['throughput_per_device']:.2f}"),
        ("window throughputs", ", ".join(f"{w:.1f}" for w in record["window_throughputs"])),
        (
            "latency mean / p50 / p90 (ms)",
            " / ".join(f"{record['latency_ms'][q]:.2f}" for q in ("mean", "p50", "p90")),
        ),
        ("peak memory (MiB)", ", ".join(f"{k} {v:.0f}" for k, v in record["peak_memory_mib"].items())),
        ("loss first -> last", f"{record['loss_first']} -> {record['loss_last']}"),
        ("first step (s)", f"{record['first_step_s']:.2f}"),
        ("world size", str(record["world_size"])),
    ]
    rows += [(key, _text(record[key])) for key in ("tokens_per_s", "tflops_per_device", "mfu") if key in record]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    console.print(f"record: {path}")


def show_external(record: dict[str, Any], path: str) -> None:
    """An external run's record: what its log reader found."""
    table = Table(title=f"{record['model']} {record['case']} {record['group']} repeat {record['repeat']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("throughput (samples/s)", f"{record['throughput']:.2f}")
    table.add_row("per device (samples/s)", f"{record['throughput_per_device']:.2f}")
    if (record.get("latency_ms") or {}).get("mean") is not None:
        table.add_row("latency mean (ms)", f"{record['latency_ms']['mean']:.2f}")
    table.add_row("log format / rule", f"{record.get('format')} / {record.get('rule')}")
    table.add_row("world size", str(record["world_size"]))
    console.print(table)
    console.print(f"record: {path}")


def _text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
