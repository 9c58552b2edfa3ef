"""Two results side by side, case by case: each side's mean (the geometric mean of its repeats' windows), their
ratio and a noise-aware verdict about it (see verdict.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlperf.records.load import load_records
from dlperf.records.schema import RunRecord
from dlperf.reporting.aggregate import median_of, summarise
from dlperf.reporting.verdict import DEFAULT_THRESHOLD, Verdict, compare_repeats, side_mean


@dataclass(frozen=True)
class CaseComparison:
    """One case in both results. `status` says which side has it; an empty side means every repeat failed."""

    model: str
    group: str
    case: str
    base_speeds: list[float]
    new_speeds: list[float]
    status: str  # "both", "only-base", "only-new"
    verdict: Verdict | None  # None unless both sides have good repeats
    base_windows: list[list[float]] = field(default_factory=list)  # each good repeat's window throughputs
    new_windows: list[list[float]] = field(default_factory=list)
    base_load: float | None = None  # the median over repeats of the cores others kept busy (`machine_load`)
    new_load: float | None = None

    @property
    def load_note(self) -> str | None:
        """Where a change was found but the machine's other load differed between the sides by LOAD_GAP cores or
        more: the change may be the machine's, not the code's (no test on the runs can tell them apart)."""
        if self.label not in ("faster", "slower") or self.base_load is None or self.new_load is None:
            return None
        if abs(self.new_load - self.base_load) < LOAD_GAP:
            return None
        return (
            f"other processes kept {self.base_load:.2f} cores busy during BASE's runs and {self.new_load:.2f} "
            f"during NEW's: the change may be the machine's; compare runs made at the same load"
        )

    @property
    def base_mean(self) -> float | None:
        """BASE's figure the ratio is about (verdict.side_mean): new_mean / base_mean is the ratio."""
        return side_mean(self.base_windows)

    @property
    def new_mean(self) -> float | None:
        return side_mean(self.new_windows)

    @property
    def failed(self) -> bool:
        """Every repeat fails in NEW where BASE ran: a regression without needing statistics."""
        return self.status == "both" and bool(self.base_speeds) and not self.new_speeds

    @property
    def regressed(self) -> bool:
        """A significant slowdown beyond the threshold, or failing where base succeeded."""
        return self.failed or (self.verdict is not None and self.verdict.verdict == "slower")

    @property
    def label(self) -> str:
        """The verdict; else only-base/only-new, failed (NEW fails where BASE ran) or base-failed."""
        if self.verdict is not None:
            return self.verdict.verdict
        if self.status != "both":
            return self.status
        return "failed" if self.failed else "base-failed"

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model,
            "group": self.group,
            "case": self.case,
            "status": self.status,
            "base_speeds": self.base_speeds,
            "new_speeds": self.new_speeds,
            "base_mean": self.base_mean,
            "new_mean": self.new_mean,
            "verdict": self.label,
            "regressed": self.regressed,
            "other_cores_base": self.base_load,
            "other_cores_new": self.new_load,
            "load_note": self.load_note,
            **({k: v for k, v in asdict(self.verdict).items() if k != "verdict"} if self.verdict else {}),
        }


LOAD_GAP = 0.25  # cores of other load between the sides that make a change doubtful (noise.py flags 0.5 in a run)


def other_cores(record: RunRecord) -> float | None:
    """The cores other processes kept busy during a run's timed window (its busiest node), where it was metered."""
    loads = [n.other_cores for n in record.machine_load or []]
    numbers = [float(x) for x in loads if isinstance(x, (int, float))]
    return max(numbers) if numbers else None


def windows(record: RunRecord) -> list[float]:
    """A repeat's evidence: its timed windows' throughputs, or its throughput alone where it has no windows (a framework
    log's one figure)."""
    kept = [w for w in record.window_throughputs or [] if w is not None and w > 0]
    return kept or ([record.throughput] if record.throughput else [])


@dataclass(frozen=True)
class Side:
    """One folder's evidence for a case: its good repeats' throughputs, their windows, the machine's other load."""

    speeds: list[float]
    windows: list[list[float]]
    load: float | None


Source = str | Path | Sequence[RunRecord]  # a results folder, or records in hand (a history's label)


def repeats(source: Source) -> dict[tuple[str, str, str], Side]:
    """Good repeats' evidence per (model, group, case) of a results folder or of records; empty where every repeat
    failed."""
    records = load_records(source) if isinstance(source, (str, Path)) else source
    return {
        (model, group, case.case): Side(
            list(case.speeds), [windows(r) for r in case.records], median_of(other_cores(r) for r in case.records)
        )
        for (model, group), cases in summarise(records).items()
        for case in cases
    }


EMPTY = Side([], [], None)


def compare(base_root: Source, new_root: Source, threshold: float = DEFAULT_THRESHOLD) -> list[CaseComparison]:
    base, new = repeats(base_root), repeats(new_root)
    rows = []
    for key in sorted(base.keys() | new.keys()):
        status = "both" if key in base and key in new else ("only-base" if key in base else "only-new")
        b, n = base.get(key, EMPTY), new.get(key, EMPTY)
        both = status == "both" and b.speeds and n.speeds
        verdict = compare_repeats(b.windows, n.windows, threshold) if both else None
        rows.append(CaseComparison(*key, b.speeds, n.speeds, status, verdict, b.windows, n.windows, b.load, n.load))
    return rows
