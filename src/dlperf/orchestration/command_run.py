"""External runs (`--command`) from the parent's side: the command checked before launch, its log read after.

The log is read by the peer readers of `dlperf extract` (the format named, or detected), with the run's shape
from its plan instead of a file name, so an external run and an extracted log give the same figures.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from dlperf.command.identity import framework_label
from dlperf.command.template import case_values, check_template, node_processes, rendezvous_for
from dlperf.errors import DataError
from dlperf.launch.base import RunJob
from dlperf.metrics.noise import MachineLoad, noise_verdict
from dlperf.peers.extract import Options, read_run
from dlperf.peers.layout import LogInfo
from dlperf.peers.registry import FORMATS, get_format
from dlperf.spec import EXTERNAL, RunSpec
from dlperf.workloads import WorkloadPlan

TAIL_LINES = 20
# What a peer record says about the file's place in the layout: the run's own record says it already.
LAYOUT_KEYS = {"schema", "source", "file", "model", "case", "group", "repeat", "nodes", "devices_per_node",
               "world_size", "batch_size", "global_batch_size", "precision", "status", "error"}  # fmt: skip


def check_command(spec: RunSpec, plan: WorkloadPlan) -> None:
    """Before any process starts: every placeholder is known (the rendezvous ones and the case's keys) and the
    log format, where named, exists."""
    values = case_values(spec.to_dict(), plan.batch_per_device, plan.global_batch, 1)
    check_template(spec.command or "", spec.command_per, values)
    # filled in once here as the agent will (a format code that does not fit its value, e.g. {precision:d})
    rdzv = rendezvous_for(spec.nodes, spec.devices_per_node, "127.0.0.1", 29500, values)
    node_processes(spec.command or "", rdzv, 0, spec.command_per, spec.shell)
    if spec.log_format != "auto":
        get_format(spec.log_format)


def line_patterns(spec: RunSpec) -> tuple[str, ...]:
    """The throughput lines `--stop-after-lines` counts: the named reader's signature, or every reader's but a
    fallback's (a tqdm bar redraws many times a second)."""
    if spec.engine != EXTERNAL or spec.stop_after_lines is None:
        return ()
    formats = [f for f in FORMATS if not f.fallback] if spec.log_format == "auto" else [get_format(spec.log_format)]
    return tuple(f.signature.pattern for f in formats)


def framework_of(spec: RunSpec, env: dict[str, Any], commands: list[dict[str, Any]]) -> str:
    """`name version`: a native run's engine and its version from the environment; an external run's
    `--framework` and the version its interpreter reported (command.identity), else `unknown`."""
    if spec.engine != EXTERNAL:
        return framework_label(spec.engine, env.get(spec.engine))
    name = spec.framework or "unknown"
    version = next((c.get("framework_version") for c in commands if c.get("framework_version")), None)
    return framework_label(name, version)


def command_fields(spec: RunSpec, commands: list[dict[str, Any]]) -> dict[str, Any]:
    """An external record's evidence beside its log's figures: why the command ended, the sampled memory of
    every node's process tree (peak of the nodes), and each node's machine load with the noise verdict."""
    if not commands:
        return {}
    hosts = [c.get("host_memory_mib_sampled") for c in commands if c.get("host_memory_mib_sampled") is not None]
    gpus = [c.get("gpu_memory_mib_sampled") for c in commands if c.get("gpu_memory_mib_sampled") is not None]
    loads = [c["machine_load"] for c in commands if c.get("machine_load")]
    fields: dict[str, Any] = {
        "ended_by": next((c["ended_by"] for c in commands if c.get("ended_by")), "the command exited"),
        "host_memory_mib_sampled": max(hosts) if hosts else None,
        "gpu_memory_mib_sampled": max(gpus) if gpus else None,
        "memory_note": next((c["memory_note"] for c in commands if c.get("memory_note")), None),
        "machine_load": loads,
        "threads": [c["threads"] for c in commands if c.get("threads")],
    }
    return fields


def noise_of(record: dict[str, Any]) -> dict[str, Any]:
    """The same `noisy` verdict as a native run's: the reader's kept windows and every node's load."""
    loads = [MachineLoad(**load) for load in record.get("machine_load") or []]
    windows = record.get("window_throughputs") or []
    return noise_verdict(windows, loads).as_record()


def read_figures(job: RunJob) -> dict[str, Any]:
    """The reader's figures from the run's log (throughput, latency where printed, format, rule, lines kept);
    DataError says why the log gives none."""
    spec, log = job.spec, job.paths.log
    if not log.exists() or log.stat().st_size == 0:
        raise DataError("the command printed nothing")
    info = LogInfo(log, spec.model, spec.nodes, spec.devices_per_node, job.plan.batch_per_device, spec.precision, 1)
    peer = read_run(info, Options(format=spec.log_format, warmup=spec.log_warmup, format_flag="--log-format"))
    if peer.get("status", "ok") != "ok":
        raise DataError(str(peer.get("error")))
    return {k: v for k, v in peer.items() if k not in LAYOUT_KEYS}


def log_tail(job: RunJob, lines: int = TAIL_LINES) -> list[str]:
    """The last lines of the run's log, else of its console: what a failed record shows."""
    for path in (job.paths.log, job.paths.console):
        if path.exists() and path.stat().st_size:
            with open(path, encoding="utf-8", errors="replace") as f:
                return [line.rstrip("\n") for line in deque(f, maxlen=lines)]
    return []
