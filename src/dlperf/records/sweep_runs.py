"""How far a sweep in a results folder got, for a report made before it ended: the runs it planned (kept in
`OUT/sweep_runs.json` at its start) against the records there, and whether a live sweep still holds the folder's
lock (its figures will change) or none does (an interrupted sweep, which `--resume` finishes). Reading it imports
nothing of the run machinery, as every reader of records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf.records.load import load_record
from dlperf.records.lock import writer_of
from dlperf.records.paths import SWEEP_RUNS, RunPaths, paths_of_record, resume_command
from dlperf.records.schema import RunRecord
from dlperf.records.store import write_json_atomic
from dlperf.records.validate import parse_json
from dlperf.wording import count

LISTED = 3  # runs a note names; the rest are counted


def save_planned(out: str | Path, runs: Sequence[RunPaths], adaptive: bool) -> None:
    """The planned runs' record paths (relative to OUT, in the order they run); `adaptive`: `--repeats auto`, whose
    cases stop before their last planned repeat once the interval is narrow enough."""
    folder = Path(out)
    records = [paths.record.relative_to(folder).as_posix() for paths in runs]
    write_json_atomic(folder / SWEEP_RUNS, {"records": records, "adaptive": adaptive})


@dataclass(frozen=True)
class SweepRuns:
    """A sweep's runs as they stand: how many are recorded; those not recorded yet, `started` (a log or console
    file: under way, or cut off) and `waiting` (nothing yet); `writer`: the live sweep holding the folder, if any."""

    recorded: int
    started: list[RunPaths]
    waiting: list[RunPaths]
    writer: str | None

    @property
    def planned(self) -> int:
        return self.recorded + len(self.started) + len(self.waiting)


def sweep_runs(folder: str | Path) -> SweepRuns | None:
    """The runs of the sweep in `folder`; None where it keeps no readable plan (single runs, an older dlperf)."""
    root = Path(folder)
    try:
        plan, problem = parse_json((root / SWEEP_RUNS).read_bytes())
    except OSError:
        return None
    if problem or not isinstance(plan, dict) or not isinstance(plan.get("records"), list):
        return None
    recorded, started, waiting = 0, [], []
    stopped: set[Path] = set()  # adaptive cases that stopped repeating: their later repeats never run
    for name in plan["records"]:
        paths = paths_of_record(root / str(name))
        case = paths.folder / paths.case_stem
        if case in stopped:
            continue
        if paths.record.exists():
            recorded += 1
            if plan.get("adaptive") and _stopped_after(paths.record):
                stopped.add(case)
        else:
            (started if paths.log.exists() or paths.console.exists() else waiting).append(paths)
    return SweepRuns(recorded, started, waiting, writer_of(root))


def _stopped_after(path: Path) -> bool:
    record = load_record(path)
    return isinstance(record, RunRecord) and record.repeats_stop is not None and bool(record.repeats_stop.stop)


def partial_note(folder: str | Path, records: int) -> str | None:
    """What a report of `folder` made now says first: a sweep still running there or an interrupted one, which of
    its runs are not recorded yet, and that the figures will change; None for a finished sweep or a folder no one
    writes. `records`: how many run records the report holds."""
    runs = sweep_runs(folder)
    if runs is not None and (runs.started or runs.waiting):
        return _sweep_note(folder, runs)
    writer = writer_of(folder)  # a single run, or a sweep of an older dlperf: its runs are not known
    if writer is None:
        return None
    return f"{writer} is still writing this folder; the tables hold the {count(records, 'record')} written so far"


def _sweep_note(folder: str | Path, runs: SweepRuns) -> str:
    so_far = f"{runs.recorded} of {runs.planned} runs recorded"
    if runs.writer:
        state = f"a sweep is still running in this folder ({runs.writer}): {so_far}"
        started = _named(runs.started, "under way")
        end = "the figures will change as they finish: report again when the sweep ends"
    else:
        state = f"the sweep in this folder was interrupted (no dlperf process holds it): {so_far}"
        started = _named(runs.started, "cut off before a record")
        end = f"the figures may change: finish it with `{resume_command(folder)}`, then report again"
    parts = [state, started, _named(runs.waiting, "not run yet"), end]
    return "; ".join(part for part in parts if part)


def _named(runs: list[RunPaths], what: str) -> str:
    """`2 runs under way (resnet50/1n2g/resnet50_b16_fp32_1, ...)`: the first few named, the rest counted."""
    if not runs:
        return ""
    names = [f"{p.folder.parent.name}/{p.folder.name}/{p.log.stem}" for p in runs[:LISTED]]
    more = f" and {len(runs) - LISTED} more" if len(runs) > LISTED else ""
    return f"{count(len(runs), 'run')} {what} ({', '.join(names)}{more})"
