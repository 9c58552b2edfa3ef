"""What a results folder carries to an experiment tracker (MLflow, W&B): each sweep as a parent run, one child run
per record, each with its parameters, metrics, tags and files. Built once here, so both trackers get the same
content; `reporting/to_mlflow.py` and `reporting/to_wandb.py` only write it.

A folder of several sweeps gives a parent run each. A run's identity is its record's (the history's `record_key`,
the hash of its content) and a sweep's is its `sweep_id` (single runs': the hash of their keys): an export looks
runs up by these tags first, so a second export of the same folder adds nothing, and one after
`dlperf sweep --resume` adds the new records under the same parent.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.records.load import load_records
from dlperf.records.schema import RunRecord, tracked
from dlperf.records.validate import is_number
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.doubts import run_doubts
from dlperf.reporting.export import case_row
from dlperf.reporting.history import record_key
from dlperf.reporting.report import write_report
from dlperf.reporting.waterfall import ScalingLoss, scaling_losses

RECORD_TAG = "dlperf.record_key"
SWEEP_TAG = "dlperf.sweep_key"
COMPLETE_TAG = "dlperf.exported"  # set last: a run without it is an interrupted export's, replaced by the next one
CASE_KEYS, RUN_METRICS = tracked(RunRecord, "param"), tracked(RunRecord, "metric")  # declared with the field
CASE_METRICS = ("median_speed", "average_speed", "speedup", "scaling_efficiency", "cv", "latency_ms_p50", "mfu")
REPORT_FILES = ("report.md", "summary.json", "runs.csv", "cases.csv")
PARAM_TEXT = 500  # a parameter's value is a short fact; MLflow refuses values over 6000 characters


@dataclass(frozen=True)
class TrackedRun:
    """One record as a tracker run."""

    key: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    steps: dict[str, list[float]]  # a metric per timing window: its values at steps 0, 1, ...
    tags: dict[str, str]
    status: str  # the record's: ok, failed, diverged
    started_ms: int | None
    finished_ms: int | None
    files: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class TrackedSweep:
    """A sweep as a parent run and its children."""

    key: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    files: list[Path]
    runs: list[TrackedRun]


def _number(value: Any) -> float | None:
    return float(value) if is_number(value) else None


def _params(prefix: str, values: Any) -> dict[str, str]:
    """A mapping's (or a record part's) scalar values as parameters `prefix.key`."""
    return {
        f"{prefix}.{k}": str(v)[:PARAM_TEXT]
        for k, v in (values if isinstance(values, dict) else vars(values) if values else {}).items()
        if isinstance(v, (str, int, float, bool)) and k != "topology"
    }


def _numbers(prefix: str, values: dict[str, Any] | None) -> dict[str, float]:
    return {f"{prefix}.{k}": v for k, raw in (values or {}).items() if (v := _number(raw)) is not None}


def _loss_metrics(prefix: str, loss: ScalingLoss) -> dict[str, float]:
    """A case's scaling loss against its ideal, in its measured parts, as metrics `prefix.part`."""
    return {f"{prefix}.measured_loss": loss.measured_loss} | {f"{prefix}.{k}": v for k, v in loss.components.items()}


def _run_params(record: RunRecord) -> dict[str, str]:
    params = {k: str(getattr(record, k))[:PARAM_TEXT] for k in CASE_KEYS if getattr(record, k, None) is not None}
    params |= _params("parallel", record.parallel) | _params("config", record.config)
    params |= _params("accelerator", record.accelerator) | _params("env", record.env)
    return params | _params("env.git", (record.env or {}).get("git"))


def _run_metrics(record: RunRecord, loss: ScalingLoss | None) -> dict[str, float]:
    metrics = {k: v for k in RUN_METRICS if (v := _number(getattr(record, k, None))) is not None}
    metrics |= _numbers("latency_ms", record.latency_ms) | _numbers("peak_memory_mib", record.peak_memory_mib)
    metrics |= _numbers("energy", {"joules_per_sample": record.energy.joules_per_sample if record.energy else None})
    if loss is not None and record.status == "ok":
        metrics |= _loss_metrics("case_scaling_loss", loss)
    return metrics


def _run_tags(record: RunRecord, key: str) -> dict[str, str]:
    flags = [d.label for d in run_doubts(record)] if record.status == "ok" else []
    tags = {
        RECORD_TAG: key,
        "dlperf.status": record.status,
        "dlperf.flags": ";".join(flags) or "none",
        "dlperf.sweep_id": record.sweep_id or "none",
        "dlperf.record": record.origin.path or "",
    }
    if record.error:
        tags["dlperf.error"] = record.error[:PARAM_TEXT]
    if record.hosts:
        tags["dlperf.hosts"] = ",".join(str(h) for h in record.hosts)[:PARAM_TEXT]
    return tags


def _run_files(record: RunRecord) -> list[Path]:
    """The record's file and its run log beside it, where there."""
    if not record.origin.path:
        return []
    path = Path(record.origin.path)
    log = path.parent / Path(record.log).name if record.log else None
    return [path, log] if log and log.is_file() else [path]


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def _run(record: RunRecord, losses: dict[tuple[str, str, str], ScalingLoss]) -> TrackedRun:
    windows = [v for raw in record.window_throughputs or [] if (v := _number(raw)) is not None]
    key = record_key(record)
    return TrackedRun(
        key=key,
        name=f"{record.model} {record.group} {record.case} r{record.repeat}",
        params=_run_params(record),
        metrics=_run_metrics(record, losses.get((record.model, record.group, record.case))),
        steps={"window_throughput": windows} if windows else {},
        tags=_run_tags(record, key),
        status=record.status,
        started_ms=_ms(record.started_at),
        finished_ms=_ms(record.finished_at),
        files=_run_files(record),
    )


@contextmanager
def tracked_sweeps(folder: str | Path) -> Iterator[list[TrackedSweep]]:
    """The folder's records as sweeps to track, one per sweep id (records of single runs, without one, are one
    more), each with its report files: the folder's own where it holds one sweep and `dlperf report` wrote them,
    else made for the export in a temporary folder (removed afterwards)."""
    root = Path(folder)
    records = load_records(root)
    if not records:
        raise ResultsError(f"no run records in {root}: export a folder that `dlperf sweep`, `run` or `extract` wrote")
    groups: dict[str | None, list[RunRecord]] = {}
    for record in records:
        groups.setdefault(record.sweep_id, []).append(record)
    with tempfile.TemporaryDirectory(prefix="dlperf-export-") as scratch:
        sweeps = []
        for i, (sweep_id, members) in enumerate(sorted(groups.items(), key=lambda item: item[0] or "")):
            report_dir = root if len(groups) == 1 and (root / "report.md").is_file() else Path(scratch) / str(i)
            if report_dir != root:
                write_report(members, report_dir, {"md", "json", "png"})
            sweeps.append(_sweep(root, sweep_id, members, report_dir))
        yield sweeps


def _sweep_metrics(summary: dict, losses: dict[tuple[str, str, str], ScalingLoss]) -> dict[str, float]:
    """Each case's figures and scaling loss, as metrics `model/group/case/name`."""
    metrics: dict[str, float] = {}
    for case in (case for cases in summary.values() for case in cases):
        row = case_row(case)
        prefix = f"{case.model}/{case.group}/{case.case}"
        metrics |= {f"{prefix}/{k}": v for k in CASE_METRICS if (v := _number(row[k])) is not None}
    for (model, group, case_name), loss in losses.items():
        metrics |= _loss_metrics(f"{model}/{group}/{case_name}/scaling_loss", loss)
    return metrics


def _sweep_params(first: RunRecord) -> dict[str, str]:
    params = {k: str(v) for k in ("model", "framework", "dlperf_version") if (v := getattr(first, k, None))}
    return params | _params("accelerator", first.accelerator) | _params("env", first.env)


def _sweep_tags(root: Path, sweep_id: str | None, records: list[RunRecord], key: str) -> dict[str, str]:
    return {
        SWEEP_TAG: key,
        "dlperf.sweep_id": sweep_id or "none",
        "dlperf.folder": str(root.resolve())[:PARAM_TEXT],
        "dlperf.records": str(len(records)),
        "dlperf.failed_runs": str(sum(r.status != "ok" for r in records)),
    }


def _sweep(root: Path, sweep_id: str | None, records: list[RunRecord], report_dir: Path) -> TrackedSweep:
    summary = summarise(records)
    losses = {(model, group, x.case): x for (model, group), found in scaling_losses(summary).items() for x in found}
    runs = [_run(r, losses) for r in records]
    key = sweep_id or hashlib.sha256("".join(sorted(r.key for r in runs)).encode()).hexdigest()
    files = [report_dir / f for f in REPORT_FILES if (report_dir / f).is_file()]
    files += sorted((report_dir / "plots").glob("*.png"))
    name = f"sweep {sweep_id}" if sweep_id else f"single runs in {root.name}"
    return TrackedSweep(
        key,
        name,
        _sweep_params(records[0]),
        _sweep_metrics(summary, losses),
        _sweep_tags(root, sweep_id, records, key),
        files,
        runs,
    )
