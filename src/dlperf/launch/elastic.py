"""One node's workers under torchrun's launcher API (elastic_launch, c10d rendezvous), for the agent (agent.py).

It writes nothing itself: `launch` returns rank 0's measurement when this node holds rank 0, or the failure with
the rank, exit code and signal of the first worker that died.

The ranks are forked from the agent, which imported torch for the launcher: each run's ranks are still new
processes, but none imports torch again (spawned ranks did, 2 to 6 s of every multi-process run on a CPU, issue
55). Forking is safe here because the agent has touched no device (CUDA is initialised in the ranks, after the
fork) and runs no torch op before it (no thread pool to inherit).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from dlperf.engines.base import node_name
from dlperf.harness.worker import run_rank
from dlperf.launch.messages import AgentSpec, NodeResult, how_it_ended
from dlperf.launch.one_process import first_meaningful_line, marked, measured_result

RANKS_DIR_ENV = "DLPERF_RANKS_DIR"
# A rank that raised waits this long before it exits. torchrun's launcher reports one failed worker, the first it
# finds dead at a poll (every 0.1 s): a peer killed by a signal breaks the others' collective (gloo's "Read error"),
# and a rank raising that at once could be found first and named as the cause. Only failing runs pay it.
CAUSE_FIRST_S = 1.0


# A new interpreter's handlers; a forked rank would keep the launcher's, which turn SIGTERM into an exception that
# waits for the running collective to return (a rank stopped after its peer died would linger until SIGKILL).
FRESH_HANDLERS = {
    signal.SIGTERM: signal.SIG_DFL,
    signal.SIGHUP: signal.SIG_DFL,
    signal.SIGQUIT: signal.SIG_DFL,
    signal.SIGINT: signal.default_int_handler,
}


@record
def rank_main(spec: AgentSpec) -> dict[str, Any] | None:
    """Every rank's entry under torchrun's launcher; `record` writes a failing rank's traceback for the agent.
    A marker file says the rank is running, so a timeout can name the ranks that never finished."""
    for signum, handler in FRESH_HANDLERS.items():
        signal.signal(signum, handler)
    with marked(os.environ[RANKS_DIR_ENV], os.environ.get("RANK", "0")):
        try:
            return run_rank(spec.run, spec.log_path, spec.kind)
        except Exception:
            time.sleep(CAUSE_FIRST_S)
            raise


def describe_failure(error: ChildFailedError) -> NodeResult:
    """The failure of a ChildFailedError as plain facts: rank, exit code, signal and message."""
    rank, failure = error.get_first_failure()
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    ended, signal_name = how_it_ended(failure.exitcode)
    text = first_meaningful_line(str(message))
    if signal_name or not text or "pytorch.org/docs" in text:
        text = f"worker rank {rank} on {node_name()} {ended}"
    return NodeResult.failed(text, rank=rank, host=node_name(), exitcode=failure.exitcode, signal=signal_name)


def launch(spec: AgentSpec) -> NodeResult:
    """Start this node's workers and wait for them; never raises for a worker's failure."""
    settings = spec.launch
    os.environ.update(settings.env)  # the workers inherit it: node name, socket interface
    os.environ[RANKS_DIR_ENV] = settings.log_dir
    config = LaunchConfig(
        min_nodes=settings.nnodes,
        max_nodes=settings.nnodes,
        nproc_per_node=settings.nproc_per_node,
        run_id=settings.run_id,
        rdzv_backend="c10d",
        rdzv_endpoint=settings.rdzv_endpoint,
        rdzv_configs={
            "timeout": settings.rdzv_timeout,
            **({} if settings.is_host is None else {"is_host": settings.is_host}),
        },
        max_restarts=0,
        monitor_interval=0.1,
        start_method="fork",  # see the module's docstring
        local_addr=settings.local_addr,
        logs_specs=DefaultLogsSpecs(log_dir=settings.log_dir),
    )
    try:
        outputs = elastic_launch(config, rank_main)(spec)
    except ChildFailedError as error:
        return describe_failure(error)
    except SignalException as error:
        name = signal.Signals(error.sigval).name
        return NodeResult.failed(f"{node_name()} stopped by {name}", host=node_name(), stopped=True)
    return measured_result(outputs.get(0) if isinstance(outputs, dict) else None)
