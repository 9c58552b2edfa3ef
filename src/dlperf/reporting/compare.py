"""Two results side by side, case by case: the ratio of medians and a noise-aware verdict (see verdict.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dlperf.records.load import load_records
from dlperf.records.schema import RunRecord
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.verdict import DEFAULT_THRESHOLD, Verdict, compare_repeats


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
            "verdict": self.label,
            "regressed": self.regressed,
            **({k: v for k, v in self.verdict.as_dict().items() if k != "verdict"} if self.verdict else {}),
        }


def windows(record: RunRecord) -> list[float]:
    """A repeat's evidence: its timed windows' throughputs, or its throughput alone where it has no windows (a peer
    log's one figure)."""
    kept = [w for w in record.window_throughputs or [] if w is not None and w > 0]
    return kept or ([record.throughput] if record.throughput else [])


def repeats(root: str | Path) -> dict[tuple[str, str, str], tuple[list[float], list[list[float]]]]:
    """Good repeats' throughputs and windows per (model, group, case) of a results folder; empty where every repeat
    failed."""
    return {
        (model, group, case.case): (list(case.speeds), [windows(r) for r in case.records])
        for (model, group), cases in summarise(load_records(root)).items()
        for case in cases
    }


def compare(base_root: str | Path, new_root: str | Path, threshold: float = DEFAULT_THRESHOLD) -> list[CaseComparison]:
    base, new = repeats(base_root), repeats(new_root)
    rows = []
    for key in sorted(base.keys() | new.keys()):
        status = "both" if key in base and key in new else ("only-base" if key in base else "only-new")
        (b, bw), (n, nw) = base.get(key, ([], [])), new.get(key, ([], []))
        verdict = compare_repeats(bw, nw, threshold) if status == "both" and b and n else None
        rows.append(CaseComparison(*key, b, n, status, verdict, bw, nw))
    return rows
