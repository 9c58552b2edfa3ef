"""One benchmark run from the parent's side: check, launch the node agents, write the record."""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

import torch

from dlperf.config import RunConfig
from dlperf.engine.precision import check_precision_on_device
from dlperf.errors import ConfigError, ResultsError
from dlperf.launch.hosts import hosts_for
from dlperf.launch.local import LocalLauncher
from dlperf.launch.options import LaunchOptions, in_slurm_allocation
from dlperf.reporting.files import write_json_atomic
from dlperf.reporting.layout import RunPaths, run_paths
from dlperf.reporting.record import build_record
from dlperf.workloads import Workload, get_workload


def device_type(config: RunConfig) -> str:
    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return config.device


LOCAL = LaunchOptions()


class Launcher(Protocol):
    """Starts a run's node agents somewhere and returns one result: rank 0's measurement or the failure."""

    def describe(self, spec: dict[str, Any], paths: RunPaths) -> list[str]: ...

    def run(self, spec: dict[str, Any], workdir: Path, paths: RunPaths, timeout: float) -> dict[str, Any]: ...


def launcher_for(config: RunConfig, launch: LaunchOptions) -> Launcher:
    if launch.kind == "ssh":
        from dlperf.launch.ssh import SshLauncher

        return SshLauncher(hosts_for(list(launch.hosts), config.nodes, config.devices_per_node), launch)
    if launch.kind == "slurm":
        from dlperf.launch.slurm import SrunLauncher

        return SrunLauncher(launch)
    return LocalLauncher(launch)


def check_config(config: RunConfig, launch: LaunchOptions = LOCAL) -> Workload:
    """Every check that can run before a process starts; raises ConfigError/DataError with the fix."""
    config.validate()
    launch.validate()
    workload = get_workload(config.model)
    workload.validate(config)
    if launch.kind == "ssh":
        hosts_for(list(launch.hosts), config.nodes, config.devices_per_node)
    if launch.kind != "local":
        return workload  # the devices are on other machines: the workers check them there
    if config.nodes > 1:
        raise ConfigError(f"--nodes {config.nodes} needs other machines: give --hosts/--hostfile, or --launcher slurm")
    kind = device_type(config)
    check_precision_on_device(config.precision, kind)
    if kind == "cuda":
        available = torch.cuda.device_count()
        if config.devices_per_node > available:
            raise ConfigError(
                f"asked for {config.devices_per_node} CUDA devices per node but this machine has {available}: "
                f"lower --devices-per-node"
            )
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


def build_spec(config: RunConfig, paths: RunPaths, launch: LaunchOptions) -> dict[str, Any]:
    """What every node agent gets; each launcher adds the rendezvous endpoint and node's own settings."""
    return {
        "config": config.to_dict(),
        "log_path": str(paths.log.resolve()),
        "launch": {
            "nnodes": config.nodes,
            "nproc_per_node": config.devices_per_node,
            "run_id": f"dlperf-{uuid.uuid4().hex[:12]}",
            "env": launch.worker_env(),
        },
    }


def describe_run(config: RunConfig, repeat: int, out: str | Path, launch: LaunchOptions = LOCAL) -> str:
    """The exact commands (and specs) a run would execute, for --dry-run."""
    check_config(config, launch)
    paths = run_paths(out, config, repeat)
    lines = launcher_for(config, launch).describe(build_spec(config, paths, launch), paths)
    return "\n".join([f"# {config.model} {config.topology} repeat {repeat} -> {paths.record}", *lines])


def execute_run(
    config: RunConfig,
    repeat: int,
    out: str | Path,
    env: dict[str, Any],
    overwrite: bool = False,
    launch: LaunchOptions = LOCAL,
) -> dict[str, Any]:
    """Launch one run and write its record atomically; a failed run is a record too, never an exception."""
    workload = check_config(config, launch)
    if launch.kind == "slurm" and not in_slurm_allocation():
        raise ConfigError("--launcher slurm runs one case inside an allocation (SLURM_JOB_ID); outside use sbatch")
    paths = run_paths(out, config, repeat)
    claim_paths(paths, overwrite)
    launcher = launcher_for(config, launch)
    spec = build_spec(config, paths, launch)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="dlperf-") as tmp:
        result = launcher.run(spec, Path(tmp), paths, timeout=config.timeout)
    node_envs = result.pop("node_envs", None)
    if node_envs:
        env = {**env, "nodes": node_envs}
    record = build_record(config, workload, repeat, result, env, started, time.time())
    record["log"] = paths.log.name
    write_json_atomic(paths.record, record)
    return record
