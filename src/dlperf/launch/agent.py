"""One node's torchrun agent, run as `python -m dlperf.launch.agent SPEC RESULT`.

It starts the node's workers through torchrun's launcher API (elastic_launch, c10d rendezvous) and
writes a JSON result: rank 0's measurement when this node holds rank 0, or the failure with the rank,
exit code and signal of the first worker that died. The parent process (local or over ssh) reads it.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
from typing import Any

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from dlperf.engine.worker import run_worker
from dlperf.reporting.files import write_json_atomic


def describe_failure(error: ChildFailedError) -> dict[str, Any]:
    """The first failure of a ChildFailedError as plain facts: rank, exit code, signal and message."""
    rank, failure = error.get_first_failure()
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    signal = failure.signal_name() if failure.exitcode < 0 else None
    text = str(message).strip().splitlines()[-1] if str(message).strip() else ""
    if signal:
        text = f"worker rank {rank} on {socket.gethostname()} was killed by {signal}"
    elif not text or "pytorch.org/docs" in text:
        text = f"worker rank {rank} on {socket.gethostname()} exited with code {failure.exitcode}"
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "exitcode": failure.exitcode,
        "signal": signal,
        "error": text,
    }


def launch(spec: dict[str, Any]) -> dict[str, Any]:
    """Start this node's workers and wait for them; never raises for a worker's failure."""
    launch_spec = spec["launch"]
    config = LaunchConfig(
        min_nodes=launch_spec["nnodes"],
        max_nodes=launch_spec["nnodes"],
        nproc_per_node=launch_spec["nproc_per_node"],
        run_id=launch_spec["run_id"],
        rdzv_backend="c10d",
        rdzv_endpoint=launch_spec["rdzv_endpoint"],
        rdzv_configs={
            "timeout": launch_spec.get("rdzv_timeout", 300),
            "is_host": launch_spec.get("is_host", True),
        },
        max_restarts=0,
        monitor_interval=0.1,
        start_method="spawn",
        local_addr=launch_spec.get("local_addr"),
        logs_specs=DefaultLogsSpecs(log_dir=launch_spec.get("log_dir")),
    )
    try:
        outputs = elastic_launch(config, run_worker)(spec)
    except ChildFailedError as error:
        return {"status": "failed", **describe_failure(error)}
    rank0 = outputs.get(0) if isinstance(outputs, dict) else None
    if rank0 is None:
        return {"status": "ok", "holds_rank0": False, "host": socket.gethostname()}
    return {"status": "ok", "holds_rank0": True, **rank0}


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this agent when its parent dies, even by SIGKILL; the agent then stops its workers."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m dlperf.launch.agent", description=__doc__)
    parser.add_argument("spec", help="JSON file with the run's config, log path and launch settings")
    parser.add_argument("result", help="where to write this node's JSON result")
    args = parser.parse_args(argv)
    with open(args.spec, encoding="utf-8") as f:
        spec = json.load(f)
    result = launch(spec)
    write_json_atomic(args.result, result)
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
