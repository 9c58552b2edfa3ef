"""What the routers did, measured, not assumed: each MoE block's picks per expert (all ranks' summed) per timing
window and over the timed window, their imbalance (max / mean, per block, then averaged over blocks; the worst
block's too), the same per expert-parallel rank, and the picks a capacity factor dropped. After each optimizer step
the step's counts also move the expert bias (torchtitan's aux-loss-free balancing) where the router uses one.
The meter is the step's window probe (started and stopped around the timed steps) and closes a window wherever
the loss is read (every rank, at window edges)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from dlperf.workloads.moe.config import BIAS_UPDATE_RATE, MoEConfig
from dlperf.workloads.moe.model import MoE, Routing


def imbalance(counts: torch.Tensor) -> tuple[float, float]:
    """(mean over blocks, worst block) of max / mean of each block's row of `counts` (blocks, bins)."""
    ratios = counts.max(1).values / counts.mean(1).clamp(min=1e-12)
    return float(ratios.mean()), float(ratios.max())


def window_figures(counts: torch.Tensor, dropped: float, ep: int) -> dict[str, Any]:
    """One window's record from its counts (blocks, experts) and dropped picks."""
    per_rank = counts.view(counts.shape[0], ep, -1).sum(2)
    mean, worst = imbalance(counts)
    kept = float(counts.sum())
    return {
        "tokens_per_expert": [int(n) for n in counts.sum(0).tolist()],
        "tokens_per_ep_rank": [int(n) for n in per_rank.sum(0).tolist()],
        "imbalance": mean,
        "imbalance_worst_block": worst,
        "ep_imbalance": imbalance(per_rank)[0],
        "routed_tokens": int(kept + dropped),
        "dropped_tokens": int(dropped),
    }


class RoutingMeter:
    def __init__(self, config: MoEConfig, routing: Routing, distributed: bool) -> None:
        self.ep, self.bias, self.distributed = config.ep, routing.expert_bias, distributed
        self.facts = {
            "routing": config.routing,
            "load_balance": config.load_balance if config.routing == "learned" else None,
            "capacity_factor": config.capacity_factor,
            "experts_impl": "grouped" if routing.grouped else "loop",
        }
        self.blocks: list[MoE] = []
        self.model: dict[str, Any] = {}
        self.timing = False
        self.windows: list[dict[str, Any]] = []

    def watch(self, blocks: list[MoE], model: dict[str, Any]) -> None:
        """The MoE blocks this rank holds, and the step's `model` facts the result goes into."""
        self.blocks, self.model = blocks, model
        experts = blocks[0].num_experts if blocks else 0
        self.window = torch.zeros(len(blocks), experts)
        self.dropped = torch.zeros(())
        self.total = torch.zeros(len(blocks), experts)
        self.total_dropped = 0.0

    def after_step(self, modules: list) -> None:
        """The step's counts into the window; the expert bias moved by their sign, all ranks' summed (torchtitan:
        bias += rate x sign(mean - count), centred)."""
        if not self.blocks:
            return
        counts = torch.stack([block.tokens_per_expert for block in self.blocks]).cpu()
        self.window += counts
        self.dropped += sum(float(block.dropped) for block in self.blocks)
        for block in self.blocks:
            block.tokens_per_expert.zero_()
            block.dropped.zero_()
        if self.bias:
            self._move_bias(counts)

    def _move_bias(self, counts: torch.Tensor) -> None:
        device = self.blocks[0].router.expert_bias.device
        counts = counts.to(device)
        if self.distributed:
            dist.all_reduce(counts)
        delta = BIAS_UPDATE_RATE * torch.sign(counts.mean(1, keepdim=True) - counts)
        delta -= delta.mean(1, keepdim=True)
        for block, change in zip(self.blocks, delta):
            block.router.expert_bias.add_(change)

    def wrap(self, read_loss):
        """The step's loss reader, closing the routing window where it reads (every rank, at window edges)."""

        def read(output: Any) -> float | None:
            loss = read_loss(output)
            self._close_window()
            return loss

        return read

    def _close_window(self) -> None:
        if not self.blocks:
            return
        both = torch.cat((self.window.flatten(), self.dropped.view(1)))
        if self.distributed:
            device = self.blocks[0].router.expert_bias.device
            both = both.to(device)
            dist.all_reduce(both)
            both = both.cpu()
        counts, dropped = both[:-1].view_as(self.window), float(both[-1])
        self.window.zero_()
        self.dropped.zero_()
        if self.timing:
            self.windows.append(window_figures(counts, dropped, self.ep))
            self.total += counts
            self.total_dropped += dropped

    def start(self) -> None:
        """The timed window opens: what the warm-up routed is left out."""
        self.timing, self.windows = True, []
        if self.blocks:
            self.window.zero_()
            self.dropped.zero_()

    def stop(self) -> None:
        self.timing = False
        if self.blocks and self.windows:
            self.model["moe"] = {**self.facts, **window_figures(self.total, self.total_dropped, self.ep),
                                 "windows": self.windows}  # fmt: skip
