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
    latency = record["latency_ms"]["p50"]
    return f"{head}: {record['throughput']:.2f} samples/s, {latency:.1f} ms/iter (p50){evidence_flags(record)}"


def evidence_flags(record: dict[str, Any]) -> str:
    """What the console says next to a number that should not be trusted as it is: noise, no steady state,
    stragglers; empty for a clean run."""
    flags = []
    if record.get("noisy"):
        flags.append("NOISY: " + "; ".join(record.get("noise_reasons") or []))
    steady = record.get("steady_state") or {}
    warmup = record.get("warmup") or {}
    if steady.get("stable") is False or warmup.get("stable") is False:
        flags.append("NEVER STABLE: " + (warmup.get("reason") or steady.get("reason") or ""))
    stragglers = record.get("stragglers") or {}
    if stragglers.get("flagged"):
        flags.append(f"STRAGGLER rank(s) {stragglers['stragglers']} (slowest on {stragglers['slowest_host']})")
    stop = record.get("repeats_stop")
    if stop:
        flags.append(f"repeats {'stopped' if stop.get('stop') else 'go on'}: {stop['reason']}")
    return "".join(f" [{flag}]" for flag in flags)


def show_record(record: dict[str, Any], path: str) -> None:
    table = Table(title=f"{record['model']} {record['case']} {record['group']} repeat {record['repeat']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
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
    steady = record.get("throughput_steady")
    rows.append(("steady throughput (samples/s)", _text(steady) if steady else "never stable"))
    keys = ("tokens_per_s", "flops_per_iteration", "tflops_per_device", "mfu", "mfu_note", "window_cv")
    rows += [(key, _text(record[key])) for key in keys if record.get(key) is not None]
    energy = record.get("energy") or {}
    rows.append(("energy (J)", _text(energy.get("joules")) if energy.get("joules") else f"n/a: {energy.get('reason')}"))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    flags = evidence_flags(record)
    if flags:
        console.print(f"flags:{flags}", markup=False)
    console.print(f"record: {path}")


def _text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
