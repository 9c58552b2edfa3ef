"""Where a results folder's hours went: its runs' wall time beside the timed windows it bought, from the records'
own stamps (`started_at`/`finished_at` of each run, its `elapsed_s`, its warm-up's and its sync ablation's
`elapsed_s`; records older than those two give the first step alone and the ablation's timed steps).

A methodology that starts every repeat as a fresh process pays start-up per run; this says how much, so a sweep
that spends most of a GPU node outside its timed windows shows it (issue 55's measure of dlperf's own cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dlperf.records.schema import RunRecord


@dataclass(frozen=True)
class TimeSpent:
    """Seconds: from the first run's start to the last one's end, and what the runs spent it on."""

    runs: int
    span_s: float
    timed_s: float
    warmups_s: float
    compiling_s: float  # a step compiled before its first run (XLA's); torch.compile's is in the first step
    ablation_s: float
    in_runs_s: float  # every run's launch to its record

    @property
    def rest_of_runs_s(self) -> float:
        """Processes and imports, rendezvous, the model's build, gathering, the record."""
        return max(self.in_runs_s - self.timed_s - self.warmups_s - self.compiling_s - self.ablation_s, 0.0)

    @property
    def between_runs_s(self) -> float:
        """The machine's facts, the report, the gaps between one run's record and the next one's launch."""
        return max(self.span_s - self.in_runs_s, 0.0)


def time_spent(records: Sequence[RunRecord]) -> TimeSpent | None:
    """The folder's time by part, over the runs that carry both stamps; None where none does."""
    stamped = [r for r in records if None not in (r.started_at, r.finished_at)]
    if not stamped:
        return None
    starts, ends = [r.started_at for r in stamped], [r.finished_at for r in stamped]
    return TimeSpent(
        runs=len(stamped),
        span_s=max(ends) - min(starts),
        timed_s=_seconds(r.elapsed_s for r in stamped),
        warmups_s=_seconds(map(_warmup_s, stamped)),
        compiling_s=_seconds(r.warmup.compiled_ahead_s for r in stamped if r.warmup),
        ablation_s=sum(map(_ablation_s, stamped)),
        in_runs_s=sum(ends) - sum(starts),
    )


def _seconds(values: Iterable[float | None]) -> float:
    return sum(v for v in values if v is not None)


def _warmup_s(record: RunRecord) -> float | None:
    """The warm-up as it measured itself, its first step included; else its first step alone."""
    warmup = record.warmup
    return warmup.elapsed_s if warmup and warmup.elapsed_s is not None else record.first_step_s


def _ablation_s(record: RunRecord) -> float:
    """The sync ablation after the timed window as it measured itself, each window's settling step included; else
    its timed steps alone, as many without synchronisation as with it."""
    ablation = record.ablation
    if ablation is None:
        return 0.0
    if ablation.elapsed_s is not None:
        return ablation.elapsed_s
    if not ablation.iters or ablation.step_ms is None or ablation.synced_step_ms is None:
        return 0.0
    return ablation.iters * (ablation.step_ms + ablation.synced_step_ms) / 1000


def time_lines(records: Sequence[RunRecord]) -> list[str]:
    """report.md's section: the wall time and each part's share of it."""
    spent = time_spent(records)
    if spent is None or spent.span_s <= 0:
        return []
    parts = (
        ("timed windows", spent.timed_s),
        ("warm-ups (their first steps' start-up and compiling included)", spent.warmups_s),
        ("XLA's compiling ahead of the warm-ups", spent.compiling_s),
        ("sync ablation", spent.ablation_s),
        ("the rest of each run (processes, imports, rendezvous, the model's build, the record)", spent.rest_of_runs_s),
        ("between runs (machine facts, reports, gaps)", spent.between_runs_s),
    )  # fmt: skip
    said = "; ".join(f"{name} {_minutes(s)} ({s / spent.span_s:.0%})" for name, s in parts if s > 0)
    outside = spent.rest_of_runs_s + spent.between_runs_s
    return [
        "## Where the time went",
        "",
        f"{spent.runs} runs took {_minutes(spent.span_s)} from the first start to the last end: {said}. Outside the "
        f"steps they ran (timed, warm-up, compiling, ablation): {_minutes(outside)} ({outside / spent.span_s:.0%}).",
        "",
    ]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"
