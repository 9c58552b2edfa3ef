"""The entry point of every rank started by torchrun's launcher: set up, build, time, gather."""

from __future__ import annotations

import os
import socket
from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from dlperf.config import RunConfig
from dlperf.errors import ConfigError
from dlperf.metrics.memory import max_over_ranks, peak_memory_mib, reset_peak
from dlperf.reporting.runlog import RunLogWriter
from dlperf.workloads import DistContext, get_workload


def node_name() -> str:
    """The node as the launcher addresses it (network namespaces share one host name), else the host name."""
    return os.environ.get("DLPERF_NODE") or socket.gethostname()


def resolve_device(choice: str, local_rank: int) -> torch.device:
    """`auto` takes CUDA when present; each rank owns the device of its local rank."""
    use_cuda = choice == "cuda" or (choice == "auto" and torch.cuda.is_available())
    if not use_cuda:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError("--device cuda asked for, but no CUDA device is visible: use --device cpu")
    return torch.device("cuda", local_rank)


def _init(config: RunConfig) -> DistContext:
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    device = resolve_device(config.device, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // local_world))  # the cores we may use
    if world_size > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=device)


def _barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()


@record
def run_worker(spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run one benchmark on this rank; rank 0 returns the measurement with every rank's facts."""
    from dlperf.engine.loop import time_workload

    config = RunConfig(**spec["config"])
    ctx = _init(config)
    workload = get_workload(config.model)
    torch.manual_seed(config.seed)
    reset_peak(ctx.device)
    log = RunLogWriter(spec["log_path"]) if ctx.rank == 0 else None
    try:
        global_batch = workload.global_batch(config)
        if log:
            log.config({**config.to_dict(), "global_batch_size": global_batch, "world_size": ctx.world_size})
        measurement = time_workload(
            workload, config, ctx, barrier=lambda: _barrier(ctx), on_window=log.window if log else None
        )
        facts = {
            "rank": ctx.rank,
            "host": node_name(),
            "device": torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda" else "cpu",
            "peak_memory_mib": peak_memory_mib(ctx.device),
        }
        ranks = [None] * ctx.world_size
        if ctx.distributed:
            dist.all_gather_object(ranks, facts)
        else:
            ranks = [facts]
    finally:
        if log:
            log.close()
        if ctx.distributed:
            dist.destroy_process_group()
    if ctx.rank != 0:
        return None
    return {
        "measurement": asdict(measurement),
        "throughput": measurement.throughput,
        "ranks": ranks,
        "peak_memory_mib": max_over_ranks([r["peak_memory_mib"] for r in ranks]),
        "device_type": ctx.device.type,
    }
