"""One node's torchrun agent, run as `python -m dlperf.launch.agent SPEC RESULT`.

SPEC `-` reads the spec as one JSON line from stdin and then treats stdin as a lifeline: when it closes
(the ssh connection or the parent is gone) the agent stops its workers. `%t` in RESULT becomes Slurm's task
id, so one srun command gives each node its own result file.

It starts the node's workers through torchrun's launcher API (elastic_launch, c10d rendezvous) and
writes a JSON result: rank 0's measurement when this node holds rank 0, or the failure with the rank,
exit code and signal of the first worker that died. The parent process (local or over ssh) reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from dlperf.engine.worker import node_name, run_worker
from dlperf.metrics.environment import collect_environment
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
        text = f"worker rank {rank} on {node_name()} was killed by {signal}"
    elif not text or "pytorch.org/docs" in text:
        text = f"worker rank {rank} on {node_name()} exited with code {failure.exitcode}"
    return {
        "rank": rank,
        "host": node_name(),
        "exitcode": failure.exitcode,
        "signal": signal,
        "error": text,
    }


def launch(spec: dict[str, Any]) -> dict[str, Any]:
    """Start this node's workers and wait for them; never raises for a worker's failure."""
    launch_spec = spec["launch"]
    os.environ.update(launch_spec.get("env", {}))  # the workers inherit it: node name, socket interface
    is_host = launch_spec.get("is_host", True)  # None: c10d decides by matching the endpoint to this machine
    config = LaunchConfig(
        min_nodes=launch_spec["nnodes"],
        max_nodes=launch_spec["nnodes"],
        nproc_per_node=launch_spec["nproc_per_node"],
        run_id=launch_spec["run_id"],
        rdzv_backend="c10d",
        rdzv_endpoint=launch_spec["rdzv_endpoint"],
        rdzv_configs={
            "timeout": launch_spec.get("rdzv_timeout", 300),
            **({} if is_host is None else {"is_host": is_host}),
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
    except SignalException as error:
        name = signal.Signals(error.sigval).name
        return {"status": "failed", "stopped": True, "host": node_name(), "error": f"{node_name()} stopped by {name}"}
    rank0 = outputs.get(0) if isinstance(outputs, dict) else None
    if rank0 is None:
        return {"status": "ok", "holds_rank0": False, "host": node_name()}
    return {"status": "ok", "holds_rank0": True, **rank0}


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this agent when its parent dies, even by SIGKILL; the agent then stops its workers."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def read_spec_with_lifeline() -> dict[str, Any]:
    """The spec from stdin's first line; later, end of stdin SIGTERMs this agent, which stops its workers."""
    spec = json.loads(sys.stdin.buffer.readline())

    def watch() -> None:
        while os.read(0, 4096):  # the raw descriptor: a buffered reader's lock would hang shutdown
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()
    return spec


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m dlperf.launch.agent", description=__doc__)
    parser.add_argument("spec", help="JSON file with the run's config, log path and launch settings; - for stdin")
    parser.add_argument("result", help="where to write this node's JSON result (%%t: Slurm's task id)")
    args = parser.parse_args(argv)
    if args.spec == "-":
        spec = read_spec_with_lifeline()
    else:
        with open(args.spec, encoding="utf-8") as f:
            spec = json.load(f)
    result = launch(spec)
    if spec["launch"].get("collect_env"):
        result["env"] = {"node": node_name(), **collect_environment()}
    write_json_atomic(args.result.replace("%t", os.environ.get("SLURM_PROCID", "0")), result)
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
