"""Rank side of `dlperf commbench`: times collectives inside an already initialised process group."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from dlperf.metrics.bandwidth import Timing


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _collective(op: str, size_bytes: int, device: torch.device, dtype: torch.dtype) -> tuple[int, Callable[[], None]]:
    """The buffers of one collective at one size (rounded down to whole elements per rank) and a call of it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    itemsize = torch.empty((), dtype=dtype).element_size()
    per_rank = max(1, size_bytes // (itemsize * world))
    whole = per_rank * world
    if op == "all_reduce":
        buffer = torch.ones(whole, device=device, dtype=dtype)
        return whole * itemsize, lambda: dist.all_reduce(buffer)
    if op == "all_gather":
        shard = torch.ones(per_rank, device=device, dtype=dtype)
        gathered = torch.empty(whole, device=device, dtype=dtype)
        return whole * itemsize, lambda: dist.all_gather_into_tensor(gathered, shard)
    if op == "reduce_scatter":
        full = torch.ones(whole, device=device, dtype=dtype)
        shard = torch.empty(per_rank, device=device, dtype=dtype)
        return whole * itemsize, lambda: dist.reduce_scatter_tensor(shard, full)
    if op == "all_to_all":  # each rank's buffer split evenly over the ranks, its own 1/n staying (nccl-tests')
        sent = torch.ones(whole, device=device, dtype=dtype)
        received = torch.empty(whole, device=device, dtype=dtype)
        return whole * itemsize, lambda: dist.all_to_all_single(received, sent)
    # send_recv: a ring, each rank sending to the next and receiving from the one before, as nccl-tests does
    message = max(1, size_bytes // itemsize)
    outgoing = torch.ones(message, device=device, dtype=dtype)
    incoming = torch.empty(message, device=device, dtype=dtype)

    def ring() -> None:
        if world == 1:
            incoming.copy_(outgoing)
            return
        ops = [
            dist.P2POp(dist.isend, outgoing, (rank + 1) % world),
            dist.P2POp(dist.irecv, incoming, (rank - 1) % world),
        ]
        for request in dist.batch_isend_irecv(ops):
            request.wait()

    return message * itemsize, ring


def measure_collectives(
    ops: Sequence[str],
    sizes_bytes: Sequence[int],
    warmup: int = 5,
    repeats: int = 20,
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> list[Timing]:
    """Mean seconds per call of each (op, size), the slowest rank's; every rank gets the same list.

    The device is synchronised and the ranks meet at a barrier only at the edges of each batch of `repeats`
    calls, so launch overheads overlap as in training; the slowest rank's time is what a step waits for.
    """
    device = device or torch.device("cpu")
    world = dist.get_world_size()
    timings: list[Timing] = []
    for op in ops:
        for size in sizes_bytes:
            actual_bytes, call = _collective(op, size, device, dtype)
            seconds = _slowest_mean(call, warmup, repeats, device)
            timings.append(Timing(op=op, size_bytes=actual_bytes, world_size=world, seconds=seconds))
    return timings


def _slowest_mean(call: Callable[[], None], warmup: int, repeats: int, device: torch.device) -> float:
    """Seconds per call over `repeats` calls after `warmup`, synchronised only at the edges; the slowest rank's."""
    for _ in range(warmup):
        call()
    _sync(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    _sync(device)
    elapsed = torch.tensor([(time.perf_counter() - start) / repeats], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())
