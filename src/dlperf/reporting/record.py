"""The JSON record of one run: the contract that reports and users' scripts read (see docs/records.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlperf import __version__
from dlperf.config import RunConfig
from dlperf.errors import ResultsError
from dlperf.metrics.stats import latency_summary

if TYPE_CHECKING:  # the workloads import torch; readers of records (extract, report) need not
    from dlperf.workloads import Workload

SCHEMA = "dlperf.run/1"


def build_record(
    config: RunConfig,
    workload: Workload,
    repeat: int,
    result: dict[str, Any],
    env: dict[str, Any],
    started_at: float,
    finished_at: float,
) -> dict[str, Any]:
    """Merge the config, the launcher's result and the environment into one record."""
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "dlperf_version": __version__,
        "model": config.model,
        "case": config.topology,
        "group": workload.group(config),
        "repeat": repeat,
        "nodes": config.nodes,
        "devices_per_node": config.devices_per_node,
        "world_size": config.world_size,
        "batch_size": config.batch_size,
        "global_batch_size": workload.global_batch(config),
        "precision": config.precision,
        "config": config.to_dict(),
        "status": result.get("status", "failed"),
        "error": result.get("error"),
        "started_at": started_at,
        "finished_at": finished_at,
        "env": env,
    }
    if record["status"] != "ok":
        record["failure"] = {k: result.get(k) for k in ("rank", "host", "exitcode", "signal") if k in result}
        return record
    measured = result["measurement"]
    throughput = result["throughput"]
    record.update(
        {
            "throughput": throughput,
            "throughput_per_device": throughput / config.world_size,
            "window_throughputs": measured["window_throughputs"],
            "latency_ms": latency_summary(measured["step_ms"]),
            "elapsed_s": measured["elapsed_s"],
            "first_step_s": measured["first_step_s"],
            "compile_s": measured["first_step_s"] if config.compile else None,
            "loss_first": measured["loss_first"],
            "loss_last": measured["loss_last"],
            "peak_memory_mib": result["peak_memory_mib"],
            "device_type": result["device_type"],
            "ranks": result["ranks"],
            "hosts": sorted({r["host"] for r in result["ranks"]}),
        }
    )
    record.update(workload.derived_metrics(config, record))
    return record


def read_record(path: str | Path) -> dict[str, Any] | None:
    """A record, or None when the file is missing, partial or not a dlperf record."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or "status" not in data:
        return None
    return data


def find_records(root: str | Path) -> list[dict[str, Any]]:
    """Every complete record under `root`, in a stable order."""
    records = []
    for path in sorted(Path(root).rglob("*.json")):
        record = read_record(path)
        if record is not None:
            record["_path"] = str(path)
            records.append(record)
    return records


def load_records(root: str | Path) -> list[dict[str, Any]]:
    """`find_records` for a folder the user named: a missing or empty folder is their error to fix."""
    folder = Path(root)
    if not folder.is_dir():
        raise ResultsError(f"results folder {root} does not exist: pass a folder written by run, sweep or extract")
    records = find_records(folder)
    if not records:
        raise ResultsError(f"no dlperf run records (*.json) under {root}: run `dlperf run` or `dlperf sweep` first")
    return records
