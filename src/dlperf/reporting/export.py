"""Exports the field's tools read: tidy CSV beside summary.json, and TensorBoard event files (an extra).

`runs.csv` has one row per run record and `cases.csv` one row per case (a row of report.md), every column one
variable, so pandas, a spreadsheet or a dashboard reads them without knowing dlperf's JSON. The flags column holds
the same doubt labels as the tables (reporting/doubts.py), `;`-separated.
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.install import extra as install
from dlperf.records.schema import PeerReading, RunRecord
from dlperf.records.store import write_text_atomic
from dlperf.reporting.aggregate import CaseSummary, GroupKey, latency
from dlperf.reporting.doubts import run_doubts

RUN_COLUMNS = (
    "sweep_id", "model", "group", "case", "node_num", "gpu_num", "devices_per_node", "batch_size_per_device",
    "precision", "engine", "repeat", "status", "throughput", "throughput_per_device", "unit", "latency_ms_mean",
    "latency_ms_p50", "latency_ms_p90", "peak_memory_mib", "memory_kind", "mfu", "tflops_per_device", "flags",
    "error",
)  # fmt: skip
CASE_COLUMNS = (
    "model", "group", "case", "node_num", "gpu_num", "devices_per_node", "batch_size_per_device", "precision",
    "median_speed", "average_speed", "speedup", "median_speed_per_device", "scaling_efficiency", "cv", "repeats",
    "failed_repeats", "latency_ms_p50", "latency_ms_mean", "peak_memory_mib", "mfu", "flags",
)  # fmt: skip
MEMORY_KINDS = ("allocated", "rss", "reserved")


def memory_peak(peaks: dict[str, float]) -> tuple[float | None, str]:
    """The peak a row shows and its kind: allocated (CUDA) or rss (CPU); reserved where a run knows only that (an
    external script's process tree, a JAX device)."""
    kind = next((k for k in MEMORY_KINDS if k in peaks), next(iter(peaks), None))
    return (None, "") if kind is None else (peaks[kind], kind)


def _number(value: Any) -> Any:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_row(record: RunRecord) -> dict[str, Any]:
    memory, kind = memory_peak(record.peak_memory_mib or {})
    peer = record if isinstance(record, PeerReading) else PeerReading()
    ok = record.status == "ok"
    return {
        "sweep_id": record.sweep_id,
        "model": record.model,
        "group": record.group,
        "case": record.case,
        "node_num": record.nodes,
        "gpu_num": record.world_size,
        "devices_per_node": record.devices_per_node,
        "batch_size_per_device": record.batch_size,
        "precision": record.precision,
        "engine": record.engine or ("external" if record.kind == "external" else peer.format),  # who ran it
        "repeat": record.repeat,
        "status": record.status,
        "throughput": _number(record.throughput),
        "throughput_per_device": _number(record.throughput_per_device),
        "unit": peer.unit or "samples/s",
        "latency_ms_mean": _number(latency("mean")(record)),
        "latency_ms_p50": _number(latency("p50")(record)),
        "latency_ms_p90": _number(latency("p90")(record)),
        "peak_memory_mib": memory,
        "memory_kind": kind,
        "mfu": _number(record.mfu),
        "tflops_per_device": _number(record.tflops_per_device),
        "flags": ";".join(d.label for d in run_doubts(record)) if ok else "",
        "error": record.error,
    }


def case_row(case: CaseSummary) -> dict[str, Any]:
    stats = case.stats if case.speeds else {}
    median = stats.get("median")
    return {
        "model": case.model,
        "group": case.group,
        "case": case.case,
        "node_num": case.nodes,
        "gpu_num": case.world_size,
        "devices_per_node": case.devices_per_node,
        "batch_size_per_device": case.batch_size,
        "precision": case.precision,
        "median_speed": median,
        "average_speed": stats.get("mean"),
        "speedup": case.speedup,
        "median_speed_per_device": None if median is None else median / case.world_size,
        "scaling_efficiency": case.efficiency,
        "cv": stats.get("cv"),
        "repeats": len(case.speeds),
        "failed_repeats": len(case.failed),
        "latency_ms_p50": case.median(latency("p50")),
        "latency_ms_mean": case.median(latency("mean")),
        "peak_memory_mib": memory_peak(case.peak_memory())[0],
        "mfu": case.median(lambda r: r.mfu),
        "flags": ";".join(flag.label for flag in case.flags()),
    }


SIGNIFICANT = 6  # digits a CSV float keeps: a throughput's noise is percents, 45.491 says all that 45.4910003203 does


def cell(value: Any) -> Any:
    """A CSV cell: None empty, a float to SIGNIFICANT digits in plain notation (no `1.23e+06` a spreadsheet
    misreads), anything else as it is."""
    if value is None:
        return ""
    if not isinstance(value, float) or value == 0 or not math.isfinite(value):
        return value
    decimals = max(SIGNIFICANT - 1 - math.floor(math.log10(abs(value))), 0)
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _csv_text(columns: tuple[str, ...], rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: cell(v) for k, v in row.items()})
    return buffer.getvalue()


def write_csv(records: Sequence[RunRecord], summary: dict[GroupKey, list[CaseSummary]], out: Path) -> list[Path]:
    """runs.csv (one row per run) and cases.csv (one row per case) in `out`."""
    ordered = sorted(records, key=lambda r: (str(r.model), str(r.group), int(r.world_size or 0), str(r.case),
                                             r.repeat or 0))  # fmt: skip
    write_text_atomic(out / "runs.csv", _csv_text(RUN_COLUMNS, [run_row(r) for r in ordered]))
    cases = [case_row(case) for cases in summary.values() for case in cases]
    write_text_atomic(out / "cases.csv", _csv_text(CASE_COLUMNS, cases))
    return [out / "runs.csv", out / "cases.csv"]


TENSORBOARD_HINT = install("tensorboard")


def require_tensorboard() -> None:
    """Refuse --tensorboard before anything is written, where the package is missing: not after the report."""
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError(f"--tensorboard needs the tensorboard package: {TENSORBOARD_HINT}")


def write_tensorboard(summary: dict[GroupKey, list[CaseSummary]], logdir: str | Path) -> Path:
    """One TensorBoard run per model and group (`logdir/<model>/<group>`), its scalars against devices as the step:
    median throughput, per device, speedup, efficiency and CV, so teams see scaling on the dashboard they use."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        raise ConfigError(f"--tensorboard needs the tensorboard package: {TENSORBOARD_HINT}") from None
    root = Path(logdir)
    for (model, group), cases in summary.items():
        writer = EventFileWriter(str(root / model / group))
        for case in cases:
            if not case.speeds:
                continue
            row = case_row(case)
            values = [
                Summary.Value(tag=f"{name}", simple_value=float(row[name]))
                for name in ("median_speed", "median_speed_per_device", "speedup", "scaling_efficiency", "cv")
                if row[name] is not None
            ]
            writer.add_event(Event(wall_time=time.time(), step=case.world_size, summary=Summary(value=values)))
        writer.close()
    return root
