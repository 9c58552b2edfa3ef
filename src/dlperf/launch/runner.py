"""One benchmark run from the parent's side: check, launch the node agents, write the record."""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from dlperf.config import RunConfig
from dlperf.engine.precision import check_precision_on_device
from dlperf.errors import ConfigError, ResultsError
from dlperf.launch.local import free_port, run_agent
from dlperf.reporting.files import write_json_atomic
from dlperf.reporting.layout import RunPaths, run_paths
from dlperf.reporting.record import build_record
from dlperf.workloads import Workload, get_workload


def device_type(config: RunConfig) -> str:
    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.device


def check_config(config: RunConfig) -> Workload:
    """Every check that can run before a process starts; raises ConfigError/DataError with the fix."""
    config.validate()
    workload = get_workload(config.model)
    workload.validate(config)
    kind = device_type(config)
    check_precision_on_device(config.precision, kind)
    if kind == "cuda":
        available = torch.cuda.device_count()
        if config.devices_per_node > available:
            raise ConfigError(
                f"asked for {config.devices_per_node} CUDA devices per node but this machine has {available}: "
                f"lower --devices-per-node"
            )
    if config.nodes > 1:
        raise ConfigError(f"--nodes {config.nodes}: launching across hosts is not available yet; run with --nodes 1")
    return workload


def check_writable(out: str | Path) -> None:
    """Fail up front, not after an hour of measuring, when results cannot be written."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".dlperf-write-test-{uuid.uuid4().hex}"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as error:
        raise ResultsError(
            f"cannot write results folder {out}: {error.strerror or error}; choose another --out"
        ) from None


def claim_paths(paths: RunPaths, overwrite: bool) -> None:
    """Refuse to replace an existing run unless asked; clear it when asked."""
    existing = [p for p in (paths.log, paths.record) if p.exists()]
    if existing and not overwrite:
        raise ResultsError(f"{existing[0]} already exists: pass --overwrite to replace it, or another --out")
    for path in (paths.log, paths.record, paths.console):
        path.unlink(missing_ok=True)
    paths.folder.mkdir(parents=True, exist_ok=True)


def execute_run(
    config: RunConfig, repeat: int, out: str | Path, env: dict[str, Any], overwrite: bool = False
) -> dict[str, Any]:
    """Launch one run and write its record atomically; a failed run is a record too, never an exception."""
    workload = check_config(config)
    paths = run_paths(out, config, repeat)
    claim_paths(paths, overwrite)
    spec = {
        "config": config.to_dict(),
        "log_path": str(paths.log.resolve()),
        "launch": {
            "nnodes": 1,
            "nproc_per_node": config.devices_per_node,
            "run_id": f"dlperf-{uuid.uuid4().hex[:12]}",
            "rdzv_endpoint": f"127.0.0.1:{free_port()}",
        },
    }
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="dlperf-") as tmp:
        spec["launch"]["log_dir"] = str(Path(tmp) / "elastic")
        result = run_agent(
            spec, Path(tmp) / "spec.json", Path(tmp) / "result.json", paths.console, timeout=config.timeout
        )
    record = build_record(config, workload, repeat, result, env, started, time.time())
    record["log"] = paths.log.name
    write_json_atomic(paths.record, record)
    return record
