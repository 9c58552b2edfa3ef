"""What the terminal shows: one line per finished run, a small table after `dlperf run`.

Into a pipe or a file (stdout not a terminal) everything is plain lines: nothing is wrapped at 80 columns or cut
with an ellipsis, so paths, commands and numbers can be copied from a log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dlperf.escape import terminal
from dlperf.records.load import RecordLike, as_record
from dlperf.records.parts import Ablation, Energy, MoERouting, SteadyState, StepPhases, given
from dlperf.records.schema import PeerReading, RunRecord, shown
from dlperf.reporting.aggregate import cpu_threads, threads_text
from dlperf.reporting.doubts import console_flags
from dlperf.wording import count

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
        return f"{count(left, 'run')} left, ETA after the first run"
    bound = f" or more ({', '.join(untimed)} not yet timed)" if untimed else ""
    return f"{count(left, 'run')} left, ETA {duration(seconds)}{bound}"


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


def show_record(record: RecordLike, path: str) -> None:
    """A successful run's figures as a table, a row per field its kind declares with `show` (records/schema.py),
    its flags and where its record is."""
    record = as_record(record)
    unit = unit_of(record)
    rows = [
        row
        for name, label, how in shown(type(record))
        for row in _rows(record, label.replace("{unit}", unit), how, getattr(record, name))
    ]
    print_table(f"{record.model} {record.case} {record.group} repeat {record.repeat}", ("metric", "value"), rows)
    flags = console_flags(record)
    if flags:
        say(f"flags:{flags}")
    say(f"record: {path}")


Rows = list[tuple[str, str]]


def _rows(record: RunRecord, label: str, how: str, value: Any) -> Rows:
    """A field's rows: its rendering's below, else its value written by the format spec `how` (none where null)."""
    if how in _RENDERINGS:
        return _RENDERINGS[how](record, label, value)
    return [] if value is None else [(label, _written(value, how))]


def _written(value: Any, how: str) -> str:
    """A value by the format spec `how` (`%`: a percentage); a list's items and a mapping's `key value` pairs each
    so, the nulls left out."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {_written(item, how)}" for key, item in value.items() if item is not None)
    if isinstance(value, list):
        return ", ".join(_written(item, how) for item in value if item is not None)
    return percent(value) if how == "%" else f"{value:{how}}"


def _threads(record: RunRecord, label: str, size: int) -> Rows:
    return [(label, f"{size}{threads_text({cpu_threads(record)})}")]


def _steady(record: RunRecord, label: str, steady: SteadyState | None) -> Rows:
    if steady is None:
        return []
    return [(label, f"{record.throughput_steady:.2f}" if record.throughput_steady else "never stable")]


def _mfu(record: RunRecord, label: str, mfu: float | None) -> Rows:
    """MFU always where it was asked for, with why it is missing (none of an external script's)."""
    if mfu is None and not record.mfu_note:
        return []
    return [(label, percent(mfu) if mfu is not None else f"n/a ({record.mfu_note})")]


def _phases(record: RunRecord, label: str, phases: StepPhases | None) -> Rows:
    """Where the step went (metrics/step_phases.py); the report sets it against the 1-device run."""
    if not phases:
        return []
    parts = ", ".join(f"{name} {ms:.1f}" for name, ms in given(phases.phases_ms).items())
    waits = f"{phases.exposed_ms:.1f} / {phases.straggler_wait_ms:.1f}"
    return [(label, parts), ("exposed comm / straggler wait (ms)", waits)]


def _routing(record: RunRecord, label: str, moe: MoERouting | None) -> Rows:
    """A MoE run: the imbalance its routers measured over the timed window (max / mean picks per expert; 1.0 is
    even), and the picks a capacity factor dropped."""
    if not moe or moe.imbalance is None:
        return []
    worst = f", worst block {moe.imbalance_worst_block:.2f}" if moe.imbalance_worst_block is not None else ""
    dropped = f"; {moe.dropped_tokens} of {moe.routed_tokens} picks dropped" if moe.dropped_tokens else ""
    return [(label, f"{moe.imbalance:.2f}{worst} ({moe.routing} routing){dropped}")]


def _ablation(record: RunRecord, label: str, ablation: Ablation | None) -> Rows:
    """--ablate sync: the same steps without gradient synchronisation, or why they were not measured."""
    if not ablation:
        return []
    if not ablation.ratio:
        return [("without gradient sync", f"not measured: {ablation.reason}")]
    gap = ablation.synced_step_ms - ablation.step_ms
    return [
        (
            label,
            f"{ablation.step_ms:.1f} / {ablation.synced_step_ms:.1f} (alternating windows): "
            f"communication {gap:.1f} ms a step",
        )
    ]


def _energy(record: RunRecord, label: str, energy: Energy | None) -> Rows:
    if energy is None:
        return []
    return [(label, f"{energy.joules:.1f}" if energy.joules else f"n/a: {energy.reason}")]


# The renderings a field's declaration names (`show=(label, how)`) where a format spec cannot write it
_RENDERINGS: dict[str, Callable[[RunRecord, str, Any], Rows]] = {
    "threads": _threads,
    "steady": _steady,
    "mfu": _mfu,
    "phases": _phases,
    "routing": _routing,
    "ablation": _ablation,
    "energy": _energy,
}
