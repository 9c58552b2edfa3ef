"""A run of one process on one node, inside the agent's own process (agent.py), and what every rank keeps: its
markers and the one line that says why it failed.

One process has no peer to meet: torchrun's launcher would import torch in the agent only to wait, and again in
the rank it spawns (3 to 5 s on a CPU, issue 55). Here the framework is imported once, by the process that runs
it, as a bare script does; the rank sees the variables torchrun gives one process (a 1-rank process group, as
commbench makes, still forms). More processes or nodes keep torchrun's launcher and its rendezvous (elastic.py).
This module imports no framework.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlperf.engines.base import node_name
from dlperf.harness.results import RunMeasurement
from dlperf.harness.worker import run_rank
from dlperf.launch.messages import AgentSpec, NodeResult
from dlperf.records.codec import decode

MAX_CAUSE = 500


def running_marker(folder: str | Path, rank: int | str, state: str = "running") -> Path:
    """`rank-N.running` while the rank works; `rank-N.started`, kept, once it began (a timeout tells a rank still
    starting from one that finished)."""
    return Path(folder) / f"rank-{rank}.{state}"


@contextlib.contextmanager
def marked(folder: str | Path, rank: int | str) -> Iterator[None]:
    """The rank's markers around its work, so a timeout can name the ranks that never finished."""
    marker = running_marker(folder, rank)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    running_marker(folder, rank, "started").touch()
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def first_meaningful_line(message: str) -> str:
    """The cause's first line that says something (an exception's `Type: text`), whole: not a traceback frame,
    not a lone quote or bracket; a line ending in `:` is joined with the next one."""
    lines = [line.strip() for line in message.strip().splitlines()]
    meaningful = [
        line
        for line in lines
        if sum(c.isalnum() for c in line) >= 3 and not line.startswith(("Traceback", 'File "', "^"))
    ]
    if not meaningful:
        return ""
    text = meaningful[0]
    if text.endswith(":") and len(meaningful) > 1:
        text = f"{text} {meaningful[1]}"
    return text if len(text) <= MAX_CAUSE else text[:MAX_CAUSE] + "..."


def one_rank_env(endpoint: str) -> dict[str, str]:
    """What torchrun sets for its one worker; MASTER_ADDR/PORT: the free port(s) the launcher chose."""
    host, _, port = endpoint.rpartition(":")
    ranks = {name: "0" for name in ("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK")}
    sizes = {name: "1" for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "ROLE_WORLD_SIZE")}
    return {**ranks, **sizes, "MASTER_ADDR": host or "127.0.0.1", "MASTER_PORT": port or "29500"}


def launch(spec: AgentSpec) -> NodeResult:
    """Run the one rank here; its exception becomes the failure (its traceback goes to the console, as torchrun's
    worker prints it), never raised."""
    settings = spec.launch
    os.environ.update({**settings.env, **one_rank_env(settings.rdzv_endpoint)})
    try:
        with marked(settings.log_dir, 0):
            rank0 = run_rank(spec.run, spec.log_path, spec.kind)
    except Exception as error:  # noqa: BLE001 - any failure of the rank is the run's, reported as torchrun's would be
        traceback.print_exc()
        cause = first_meaningful_line(f"{type(error).__name__}: {error}")
        return NodeResult.failed(cause or f"worker rank 0 on {node_name()} exited with code 1", rank=0,
                                 host=node_name(), exitcode=1)  # fmt: skip
    return measured_result(rank0)


def measured_result(rank0: dict[str, Any] | None) -> NodeResult:
    """This node's result from what its rank 0 returned (None where the node holds no rank 0)."""
    return NodeResult(host=node_name(), measured=decode(RunMeasurement, rank0, strict=False) if rank0 else None)
