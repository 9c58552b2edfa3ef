"""`commbench`: collective bandwidth on a run's topology, planned and launched exactly like a run.

Not a model: its rank task (`torch_task.py`) times collectives instead of the timed loop, and its record is a
`dlperf.commbench/1` record (dlperf.metrics.bandwidth) written into the results folder like a run's. The shared
keys `warmup_iters` and `iters` are the warm-up calls and the timed repeats of every (collective, size).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dlperf.errors import ConfigError
from dlperf.metrics.bandwidth import OPS, SCHEMA, Timing, build_commbench_record
from dlperf.spec import RunSpec, setting
from dlperf.workloads.base import Workload, WorkloadPlan

DTYPES = ("fp32", "fp16", "bf16")
SIZE_RE = re.compile(r"^(\d+)([KMG]?)(i?B)?$", re.IGNORECASE)
UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
DEFAULT_SIZES = "64K,256K,1M,4M,16M,64M"


def parse_sizes(text: str) -> list[int]:
    """`1K,4M,1G` (binary units) -> bytes, in the order given."""
    sizes = []
    for part in str(text).split(","):
        match = SIZE_RE.match(part.strip())
        if not match or int(match.group(1)) <= 0:
            raise ConfigError(f"message size {part.strip()!r} is not a positive size like 4096, 64K, 16M or 1G")
        sizes.append(int(match.group(1)) * UNITS[match.group(2).upper()])
    return sizes


def parse_ops(text: str) -> list[str]:
    ops = [op.strip() for op in str(text).split(",") if op.strip()]
    unknown = [op for op in ops if op not in OPS]
    if not ops or unknown:
        raise ConfigError(f"unknown collective(s) {', '.join(unknown) or '(none)'}: --ops takes {','.join(OPS)}")
    return ops


@dataclass(frozen=True)
class CommbenchConfig:
    """Its keys (cli/commbench_cmd.py makes the flags); `dtype`'s choices are checked where the value enters."""

    ops: str = ",".join(OPS)
    sizes: str = DEFAULT_SIZES  # whole buffer per collective, nccl-tests' convention
    dtype: str = setting("fp32", "element type", choices=DTYPES)


class CommbenchWorkload(Workload):
    name = "commbench"
    config_type = CommbenchConfig
    tasks = {"torch": "dlperf.workloads.commbench.torch_task:run"}
    record_schema = SCHEMA

    def validate(self, spec: RunSpec) -> None:
        config: CommbenchConfig = spec.workload
        parse_ops(config.ops)
        parse_sizes(config.sizes)

    def plan(self, spec: RunSpec) -> WorkloadPlan:
        config: CommbenchConfig = spec.workload
        return WorkloadPlan(global_batch=0, batch_per_device=0, group=config.dtype, stem=f"commbench_{config.dtype}")

    def task_record(self, spec: RunSpec, plan: WorkloadPlan, output: dict[str, Any], device_type: str) -> dict:
        config: CommbenchConfig = spec.workload
        timings = [Timing(**t) for t in output["timings"]]
        return build_commbench_record(
            timings,
            nodes=spec.nodes,
            devices_per_node=spec.devices_per_node,
            backend=output["backend"],
            device_type=device_type,
            dtype=config.dtype,
        ) | {"warmup": spec.warmup_iters, "repeats": spec.iters}
