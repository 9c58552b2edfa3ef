"""External runs (`--command`) from the parent's side: the command checked before launch, its log read after.

The log is read by the peer readers of `dlperf extract` (the format named, or detected), with the run's shape
from its plan instead of a file name, so an external run and an extracted log give the same figures.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from dlperf.errors import DataError
from dlperf.external.command import case_values, check_template, node_processes, rendezvous_for
from dlperf.launch.base import RunJob
from dlperf.peers.extract import Options, read_run
from dlperf.peers.layout import LogInfo
from dlperf.peers.registry import get_format
from dlperf.spec import RunSpec
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


def read_figures(job: RunJob) -> dict[str, Any]:
    """The reader's figures from the run's log (throughput, latency where printed, format, rule, lines kept);
    DataError says why the log gives none."""
    spec, log = job.spec, job.paths.log
    if not log.exists() or log.stat().st_size == 0:
        raise DataError("the command printed nothing")
    info = LogInfo(log, spec.model, spec.nodes, spec.devices_per_node, job.plan.batch_per_device, spec.precision, 1)
    peer = read_run(info, Options(format=spec.log_format))
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
