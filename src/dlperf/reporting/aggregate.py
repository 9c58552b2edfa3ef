"""Repeats -> case statistics: median, mean, spread, speedup against 1n1g, scaling efficiency."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlperf.machine.env_diff import env_differences, env_nodes
from dlperf.metrics.repeats import outliers
from dlperf.metrics.stats import spread
from dlperf.records.load import RecordLike, as_record
from dlperf.records.parts import RepeatsStop
from dlperf.records.schema import RunRecord
from dlperf.reporting.doubts import BASELINE_CASE, Flag, case_flags

Figure = Callable[[RunRecord], Any]  # one figure of a record, e.g. `lambda r: r.mfu`


def median_of(values: Iterable[Any]) -> float | None:
    """Median of the numbers among `values` (a record's figure over repeats; None where a record lacks it)."""
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(numbers) if numbers else None


def number_text(value: float | None, spec: str = ".2f") -> str:
    """A table cell of a figure: empty where a run lacks it."""
    return "" if value is None else format(value, spec)


def latency(quantile: str) -> Figure:
    """A record's `latency_ms` at `mean`, `p50` or `p90`."""
    return lambda r: (r.latency_ms or {}).get(quantile)


def cpu_threads(record: RunRecord) -> int | None:
    """The threads each rank of a run on CPU devices computed with, as the ranks reported them: its device's share
    of the machine (None off the CPU, or where ranks differ, which `threads_text` of their set names)."""
    counts = {rank.cpu_threads for rank in record.ranks or []}
    return counts.pop() if len(counts) == 1 and isinstance(next(iter(counts)), int) else None


def threads_text(counts: set[int | None]) -> str:
    """`, 1 CPU thread per rank`, or the counts where runs side by side had different shares (unlike devices)."""
    counts.discard(None)
    if not counts:
        return ""
    if len(counts) > 1:
        return f", CPU threads per rank differ ({', '.join(map(str, sorted(counts)))}): unlike devices"
    (threads,) = counts
    return f", {threads} CPU thread{'s' if threads > 1 else ''} per rank"


@dataclass
class CaseSummary:
    """One case (a topology within a group) over its repeats."""

    model: str
    group: str
    case: str
    nodes: int
    devices_per_node: int
    batch_size: int
    precision: str
    speeds: list[float]
    table: str = "scaling"
    failed: list[RunRecord] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list)
    speedup: float | None = None
    speedup_note: str | None = None

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def stats(self) -> dict[str, float | None]:
        return spread(self.speeds)

    @property
    def efficiency(self) -> float | None:
        return None if self.speedup is None else self.speedup / self.world_size

    def median(self, figure: Figure) -> float | None:
        return median_of(figure(r) for r in self.records)

    def node_differences(self) -> list[str]:
        """What differs between the nodes of any repeat (driver, library versions, device model)."""
        lines: list[str] = []
        for record in self.records + self.failed:
            for line in env_differences(env_nodes(record.env or {})):
                if line not in lines:
                    lines.append(line)
        return lines

    def outlier_repeats(self) -> list[int]:
        """Repeat numbers more than 3 scaled MADs from the median (metrics/repeats.outliers): flagged, kept."""
        return [r.repeat for r, out in zip(self.records, outliers(self.speeds)) if out]

    def repeats_stop(self) -> RepeatsStop | None:
        """Why `--repeats auto` stopped this case: the decision on its last repeat, where it has one."""
        decided = [r for r in self.records + self.failed if r.repeats_stop]
        return max(decided, key=lambda r: r.repeat or 0).repeats_stop if decided else None

    def samples_per_joule(self) -> float | None:
        values = [1 / r.energy.joules_per_sample for r in self.records if r.energy and r.energy.joules_per_sample]
        return statistics.median(values) if values else None

    def flags(self) -> list[Flag]:
        """Every reason to doubt this row, each with what to do (reporting/doubts.py, the one set of rules)."""
        return case_flags(self.records, self.efficiency)

    def peak_memory(self) -> dict[str, float]:
        """Largest peak over repeats for each memory kind (allocated/reserved on CUDA, rss on CPU)."""
        peaks: dict[str, float] = {}
        for record in self.records:
            for kind, mib in (record.peak_memory_mib or {}).items():
                peaks[kind] = max(peaks.get(kind, 0.0), mib)
        return peaks


GroupKey = tuple[str, str]


def summarise(records: Sequence[RecordLike]) -> dict[GroupKey, list[CaseSummary]]:
    """Group run records by (model, group) and case; speedups use the median of the group's 1n1g case."""
    cases: dict[GroupKey, dict[str, CaseSummary]] = defaultdict(dict)
    for record in map(as_record, records):
        key = (record.model, record.group)
        case = cases[key].get(record.case)
        if case is None:
            case = cases[key][record.case] = CaseSummary(
                model=record.model,
                group=record.group,
                case=record.case,
                nodes=int(record.nodes),
                devices_per_node=int(record.devices_per_node),
                batch_size=int(record.batch_size),
                precision=record.precision,
                speeds=[],
                table=record.table or "scaling",
            )
        if record.status == "ok" and isinstance(record.throughput, (int, float)):
            case.speeds.append(float(record.throughput))
            case.records.append(record)
        else:
            case.failed.append(record)
    summary: dict[GroupKey, list[CaseSummary]] = {}
    for key in sorted(cases):
        ordered = sorted(cases[key].values(), key=lambda c: (c.nodes, c.devices_per_node, c.case))
        _set_speedups(ordered)
        summary[key] = ordered
    return summary


def _threads(case: CaseSummary) -> set[int | None]:
    return {cpu_threads(r) for r in case.records}


def like_devices(case: CaseSummary, base: CaseSummary) -> bool:
    """Whether two cases ran on devices of one size: the same CPU threads per rank (always, off the CPU)."""
    return _threads(case) == _threads(base)


def _set_speedups(cases: list[CaseSummary]) -> None:
    baseline = next((c for c in cases if c.case == BASELINE_CASE and c.speeds), None)
    for case in cases:
        if not case.speeds:
            case.speedup_note = "every repeat failed"
        elif baseline is None:
            case.speedup_note = f"no successful {BASELINE_CASE} run in this group to compare against"
        elif not like_devices(case, baseline):
            case.speedup_note = (
                f"this case ran {threads_text(_threads(case))[2:]}, {BASELINE_CASE} "
                f"{threads_text(_threads(baseline))[2:]}: CPU devices of unlike size (run both in one sweep, or "
                f"give both the same --cpu-threads)"
            )
        else:
            # DLPerf's published tables divide the medians as printed (2 places), then round: 9415.85 / 321.74
            # = 29.265 -> 29.27, where the unrounded medians give 29.26.
            case.speedup = round(round(case.stats["median"], 2) / round(baseline.stats["median"], 2), 2)


@dataclass(frozen=True)
class CompilePayoff:
    """What torch.compile costs up front and after how many steps its faster steps have paid for it."""

    model: str
    group: str
    case: str
    extra_first_step_s: float
    saved_ms_per_step: float

    @property
    def payoff_steps(self) -> int | None:
        if self.saved_ms_per_step <= 0:
            return None
        return max(0, round(self.extra_first_step_s * 1000 / self.saved_ms_per_step))


def compile_payoffs(summary: dict[GroupKey, list[CaseSummary]]) -> list[CompilePayoff]:
    """Pair each compiled case with its eager twin (the same group without `compile`)."""
    payoffs = []
    for (model, group), cases in summary.items():
        tokens = group.split("_")
        if "compile" not in tokens:
            continue
        eager = {c.case: c for c in summary.get((model, "_".join(t for t in tokens if t != "compile")), [])}
        for case in cases:
            twin = eager.get(case.case)
            if twin is None:
                continue
            first = (case.median(lambda r: r.first_step_s), twin.median(lambda r: r.first_step_s))
            step = (twin.median(latency("mean")), case.median(latency("mean")))
            if None in first or None in step:
                continue
            payoffs.append(CompilePayoff(model, group, case.case, first[0] - first[1], step[0] - step[1]))
    return payoffs
