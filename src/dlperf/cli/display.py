"""What the terminal shows: one line per finished run, a small table after `dlperf run`.

Into a pipe or a file (stdout not a terminal) everything is plain lines: nothing is wrapped at 80 columns or cut
with an ellipsis, so paths, commands and numbers can be copied from a log.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dlperf.escape import terminal
from dlperf.records.load import RecordLike, as_record
from dlperf.records.parts import Energy, given
from dlperf.records.schema import ExternalRunRecord, PeerReading, RunRecord
from dlperf.reporting.aggregate import cpu_threads, threads_text
from dlperf.reporting.doubts import console_flags

# soft_wrap: a long path or command stays one line (a terminal folds it visually, a pipe keeps it whole)
console = Console(stderr=False, highlight=False, soft_wrap=True)


def say(text: str) -> None:
    """One plain line, never wrapped, with no markup read into it (paths may hold brackets) and no terminal
    escapes or line breaks (a record's fields and a log's names are anybody's text)."""
    console.print(terminal(text), markup=False)


def percent(fraction: float | None) -> str:
    """MFU and other fractions as people read them."""
    if fraction is None:
        return "n/a"
    return "<0.1%" if 0 < fraction < 0.0005 else f"{fraction * 100:.1f}%"


def duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def eta_text(seconds: float | None, left: int, untimed: Sequence[str] = ()) -> str:
    """Time left for `left` runs (`seconds`: None before the first run); `untimed` names the cases left that no
    run of has been timed yet, whose runs were counted at the mean of the others: the ETA is then a lower bound
    (a 1n2g run with its ablation takes several times a 1n1g run)."""
    if not left:
        return ""
    if seconds is None:
        return f"{counted(left, 'run')} left, ETA after the first run"
    bound = f" or more ({', '.join(untimed)} not yet timed)" if untimed else ""
    return f"{counted(left, 'run')} left, ETA {duration(seconds)}{bound}"


def counted(n: int, noun: str) -> str:
    """`1 run`, `2 runs`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A rich table on a terminal; aligned plain columns, full width, otherwise. Every cell is shown escaped
    (one line, no terminal escapes): cells are record fields, labels and names from anywhere."""
    title, headers = terminal(title), [terminal(h) for h in headers]
    rows = [[terminal(cell) for cell in row] for row in rows]
    if console.is_terminal:
        console.print(_rich_table(title, headers, rows))
        return
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    say(title)
    for row in (headers, *rows):
        say("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


def _rich_table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    """Every text a Text: a `[/x]` in a record is shown, not read as rich markup."""
    table = Table(title=Text(title))
    for header in headers:
        table.add_column(Text(header), overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def run_line(record: RecordLike) -> str:
    """One finished run: its figures and its flags; never fails on a field a run did not measure."""
    record = as_record(record)
    head = f"{record.model} {record.case} {record.group} #{record.repeat}"
    if record.status != "ok":
        return f"{head}: FAILED: {record.error}"
    line = f"{head}: {record.throughput:.2f} {unit_of(record)}"
    latency, kind = latency_of(record)
    if latency is not None:
        line += f", {latency:.1f} ms/iter ({kind})"
    if record.tflops_per_device is not None:  # None where the step counts no FLOPs (JAX's ResNet)
        line += f", {record.tflops_per_device:.3g} TFLOP/s per device, MFU {percent(record.mfu)}"
    return line + console_flags(record)


def unit_of(record: RunRecord) -> str:
    """What the record's throughput counts: a peer reader's unit (`images/s`, `tokens/s`), else samples/s."""
    return (record.unit if isinstance(record, PeerReading) else None) or "samples/s"


def latency_of(record: RunRecord) -> tuple[float | None, str]:
    """The p50 step time, or the mean where the run (an external script's log) gives no percentiles."""
    latency = record.latency_ms or {}
    for kind in ("p50", "mean"):
        if isinstance(latency.get(kind), (int, float)):
            return float(latency[kind]), kind
    return None, ""


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def show_record(record: RecordLike, path: str) -> None:
    """A successful run's figures as a table, its flags and where its record is."""
    record = as_record(record)
    rows = _external_rows(record) if isinstance(record, ExternalRunRecord) else _native_rows(record)
    print_table(f"{record.model} {record.case} {record.group} repeat {record.repeat}", ("metric", "value"), rows)
    flags = console_flags(record)
    if flags:
        say(f"flags:{flags}")
    say(f"record: {path}")


def _native_rows(record: RunRecord) -> list[tuple[str, str]]:
    return [
        *_speed_rows(record),
        *_figure_rows(record),
        *_phase_rows(record),
        *_ablation_rows(record),
        *_routing_rows(record),
        _energy_row(record),
    ]


def _speed_rows(record: RunRecord) -> list[tuple[str, str]]:
    """What every native run measures: throughput, windows, latency, memory, loss, start-up, size, steadiness."""
    latency = record.latency_ms or {}
    steady = record.throughput_steady
    return [
        ("throughput (samples/s)", f"{record.throughput:.2f}"),
        ("per device (samples/s)", f"{record.throughput_per_device:.2f}"),
        ("window throughputs", ", ".join(f"{w:.1f}" for w in record.window_throughputs or [])),
        ("latency mean / p50 / p90 (ms)", " / ".join(f"{latency[q]:.2f}" for q in ("mean", "p50", "p90"))),
        ("peak memory (MiB)", ", ".join(f"{k} {v:.0f}" for k, v in (record.peak_memory_mib or {}).items())),
        ("loss first -> last", f"{_number(record.loss_first)} -> {_number(record.loss_last)}"),
        ("first step (s)", f"{record.first_step_s:.2f}"),
        ("world size", str(record.world_size) + threads_text({cpu_threads(record)})),
        ("steady throughput (samples/s)", f"{steady:.2f}" if steady else "never stable"),
    ]


def _figure_rows(record: RunRecord) -> list[tuple[str, str]]:
    """The derived figures a workload counts (none of them where the step counts no FLOPs, e.g. JAX's ResNet);
    MFU always, with why it is missing."""
    optional = (
        ("tokens/s", record.tokens_per_s, ".1f"),
        ("FLOPs per iteration", record.flops_per_iteration, ".4g"),
        ("TFLOP/s per device", record.tflops_per_device, ".4g"),
    )
    rows = [(label, f"{value:{spec}}") for label, value, spec in optional if value is not None]
    mfu = percent(record.mfu)
    rows.append(("MFU", mfu if record.mfu is not None else f"{mfu} ({record.mfu_note})"))
    if record.window_cv is not None:
        rows.append(("window CV", percent(record.window_cv)))
    return rows


def _phase_rows(record: RunRecord) -> list[tuple[str, str]]:
    """Where the step went (metrics/step_phases.py); the report sets it against the 1-device run."""
    phases = record.step_phases
    if not phases:
        return []
    parts = ", ".join(f"{name} {ms:.1f}" for name, ms in given(phases.phases_ms).items())
    return [
        ("step phases (ms)", parts),
        ("exposed comm / straggler wait (ms)", f"{phases.exposed_ms:.1f} / {phases.straggler_wait_ms:.1f}"),
    ]


def _routing_rows(record: RunRecord) -> list[tuple[str, str]]:
    """A MoE run: its routing and the imbalance its routers measured over the timed window (max / mean picks per
    expert; 1.0 is even), and the picks a capacity factor dropped."""
    moe = record.moe
    if not moe or moe.imbalance is None:
        return []
    worst = f", worst block {moe.imbalance_worst_block:.2f}" if moe.imbalance_worst_block is not None else ""
    dropped = f"; {moe.dropped_tokens} of {moe.routed_tokens} picks dropped" if moe.dropped_tokens else ""
    return [("expert imbalance (max/mean)", f"{moe.imbalance:.2f}{worst} ({moe.routing} routing){dropped}")]


def _ablation_rows(record: RunRecord) -> list[tuple[str, str]]:
    """--ablate sync: the same steps without gradient synchronisation, or why they were not measured."""
    ablation = record.ablation
    if not ablation:
        return []
    if not ablation.ratio:
        return [("without gradient sync", f"not measured: {ablation.reason}")]
    gap = ablation.synced_step_ms - ablation.step_ms
    return [
        (
            "step without / with gradient sync (ms)",
            f"{ablation.step_ms:.1f} / {ablation.synced_step_ms:.1f} (alternating windows): "
            f"communication {gap:.1f} ms a step",
        )
    ]


def _energy_row(record: RunRecord) -> tuple[str, str]:
    energy = record.energy or Energy()
    return ("energy (J)", f"{energy.joules:.1f}" if energy.joules else f"n/a: {energy.reason}")


def _external_rows(record: ExternalRunRecord) -> list[tuple[str, str]]:
    """An external run's record: what its log reader found."""
    unit = unit_of(record)
    rows = [
        (f"throughput ({unit})", f"{record.throughput:.2f}"),
        (f"per device ({unit})", f"{record.throughput_per_device:.2f}"),
    ]
    mean = (record.latency_ms or {}).get("mean")
    if mean is not None:
        rows.append(("latency mean (ms)", f"{mean:.2f}"))
    rows += [("log format / rule", f"{record.format} / {record.rule}"), ("world size", str(record.world_size))]
    memory = record.peak_memory_mib or {}
    if memory:
        rows.append(("peak memory (MiB)", ", ".join(f"{k} {v:.0f}" for k, v in memory.items())))
    return rows
