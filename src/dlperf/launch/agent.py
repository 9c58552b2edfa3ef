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
import dataclasses
import os
import signal
import sys
import threading

from dlperf.engines import engine_versions
from dlperf.engines.base import node_name
from dlperf.launch.messages import AgentSpec
from dlperf.metrics.environment import collect_environment
from dlperf.records.store import write_text_atomic


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this agent when its parent dies, even by SIGKILL; the agent then stops its workers."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def read_spec_with_lifeline() -> AgentSpec:
    """The spec from stdin's first line; later, end of stdin SIGTERMs this agent, which stops its workers."""
    spec = AgentSpec.from_json(sys.stdin.buffer.readline())

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
            spec = AgentSpec.from_json(f.read())
    if spec.command is not None:
        from dlperf.launch.external import launch  # another framework's own script
    else:
        from dlperf.launch.elastic import launch  # torch: imported only once the death signal is armed

    result = launch(spec)
    if spec.launch.collect_env:
        engine = spec.run.get("engine", "torch")
        env = {"node": node_name(), **collect_environment(), **engine_versions([engine])}
        result = dataclasses.replace(result, env=env)
    write_text_atomic(args.result.replace("%t", os.environ.get("SLURM_PROCID", "0")), result.to_json())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
