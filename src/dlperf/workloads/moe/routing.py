"""The routing record both engines' meters write (torch's meter.py, JAX's jax_meter.py), torch-free: one window's
figures from its kept picks per block and expert, the facts of the run's routing, and the loss reader that closes a
window wherever the loss is read (every rank, at window edges)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dlperf.workloads.moe.config import MoEConfig

LossReader = Callable[[Any], float | None]


def imbalance(counts: np.ndarray) -> tuple[float, float]:
    """(mean over blocks, worst block) of max / mean of each block's row of `counts` (blocks, bins)."""
    ratios = counts.max(1) / np.maximum(counts.mean(1), 1e-12)
    return float(ratios.mean()), float(ratios.max())


def window_figures(counts: np.ndarray, dropped: int, ep: int) -> dict[str, Any]:
    """One window's record from its kept picks (blocks, experts; the torch meter's float32, the same figures) and
    dropped picks."""
    per_rank = counts.reshape(counts.shape[0], ep, -1).sum(2)
    mean, worst = imbalance(counts)
    return {
        "tokens_per_expert": [int(n) for n in counts.sum(0)],
        "tokens_per_ep_rank": [int(n) for n in per_rank.sum(0)],
        "imbalance": mean,
        "imbalance_worst_block": worst,
        "ep_imbalance": imbalance(per_rank)[0],
        "routed_tokens": int(counts.sum()) + dropped,
        "dropped_tokens": dropped,
    }


def routing_facts(config: MoEConfig, experts_impl: str) -> dict[str, Any]:
    """What the record says of the routing beside its measured figures."""
    return {
        "routing": config.routing,
        "load_balance": config.load_balance if config.routing == "learned" else None,
        "capacity_factor": config.capacity_factor,
        "experts_impl": experts_impl,
    }


def closing_windows(read_loss: LossReader, close: Callable[[], None]) -> LossReader:
    """The step's loss reader, then `close` (the meter's window) after each read."""

    def read(output: Any) -> float | None:
        loss = read_loss(output)
        close()
        return loss

    return read
