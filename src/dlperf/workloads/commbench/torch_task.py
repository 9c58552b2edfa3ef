"""commbench's rank task under the torch engine: the collectives in this run's process group."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist

from dlperf.engines.torch.engine import TorchEngine
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.commbench import CommbenchConfig, parse_ops, parse_sizes
from dlperf.workloads.commbench.measure import measure_collectives

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def run(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine) -> dict[str, Any]:
    """Every rank times the same collectives; on one rank the engine made no group, so make a 1-rank one (the
    launcher set MASTER_ADDR/PORT), which the engine's shutdown destroys."""
    config: CommbenchConfig = spec.workload
    if not dist.is_initialized():
        dist.init_process_group("nccl" if engine.device.type == "cuda" else "gloo")
    timings = measure_collectives(
        parse_ops(config.ops),
        parse_sizes(config.sizes),
        warmup=spec.warmup_iters,
        repeats=spec.iters,
        device=engine.device,
        dtype=DTYPES[config.dtype],
    )
    return {"timings": [asdict(t) for t in timings], "backend": str(dist.get_backend())}
