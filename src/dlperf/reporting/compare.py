"""Two results side by side, case by case: the ratio of median throughputs, and which cases regressed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlperf.records.load import load_records
from dlperf.reporting.aggregate import summarise


@dataclass(frozen=True)
class CaseComparison:
    """One case in both results; a median of None means every repeat failed, `status` says which side lacks it."""

    model: str
    group: str
    case: str
    base: float | None
    new: float | None
    status: str  # "both", "only-base", "only-new"

    @property
    def ratio(self) -> float | None:
        return self.new / self.base if self.base and self.new is not None else None

    def regressed(self, threshold: float) -> bool:
        """Slower than base by more than `threshold` (a fraction), or failing where base succeeded."""
        if self.status != "both" or self.base is None:
            return False
        return self.new is None or self.ratio < 1 - threshold


def medians(root: str | Path) -> dict[tuple[str, str, str], float | None]:
    """Median throughput per (model, group, case) of a results folder; None where every repeat failed."""
    return {
        (model, group, case.case): (case.stats["median"] if case.speeds else None)
        for (model, group), cases in summarise(load_records(root)).items()
        for case in cases
    }


def compare(base_root: str | Path, new_root: str | Path) -> list[CaseComparison]:
    base, new = medians(base_root), medians(new_root)
    rows = []
    for key in sorted(base.keys() | new.keys()):
        status = "both" if key in base and key in new else ("only-base" if key in base else "only-new")
        rows.append(CaseComparison(*key, base.get(key), new.get(key), status))
    return rows
