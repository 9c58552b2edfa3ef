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
from dlperf.workloads.moe.routing import LossReader, closing_windows, routing_facts, window_figures


class RoutingMeter:
    """Counts kept per MoE block of the whole model, a row each (zero where another pipeline stage holds the block),
    so one all-reduce over every rank sums each block's picks over its data-parallel ranks, whatever the stage."""

    def __init__(self, config: MoEConfig, routing: Routing, distributed: bool, device: torch.device) -> None:
        self.ep, self.bias, self.distributed, self.device = config.ep, routing.expert_bias, distributed, device
        self.tp = config.tp  # every tp rank routes the same tokens: the sum over all ranks counts them tp times
        self.facts = routing_facts(config, "grouped" if routing.grouped else "loop")
        self.first = config.num_dense_layers
        shape = (config.num_layers - config.num_dense_layers, config.num_experts)
        self.window, self.total = torch.zeros(shape), torch.zeros(shape)
        self.dropped, self.total_dropped = torch.zeros(()), 0.0
        self.blocks: dict[int, MoE] = {}
        self.model: dict[str, Any] = {}
        self.timing = False
        self.windows: list[dict[str, Any]] = []

    def watch(self, blocks: dict[int, MoE], model: dict[str, Any]) -> None:
        """The MoE blocks this rank holds by layer, and the step's `model` facts the result goes into."""
        self.blocks, self.model = {layer - self.first: block for layer, block in blocks.items()}, model

    def after_step(self, modules: list) -> None:
        """The step's counts into the window; the expert bias moved by their sign, all ranks' summed (torchtitan:
        bias += rate x sign(mean - count), centred)."""
        counts = torch.zeros_like(self.window)
        for row, block in self.blocks.items():
            counts[row] = block.tokens_per_expert.cpu()
            self.dropped += float(block.dropped)
            block.tokens_per_expert.zero_()
            block.dropped.zero_()
        self.window += counts
        if self.bias:
            self._move_bias(counts)

    def _move_bias(self, counts: torch.Tensor) -> None:
        counts = counts.to(self.device)
        if self.distributed:
            dist.all_reduce(counts)
        delta = BIAS_UPDATE_RATE * torch.sign(counts.mean(1, keepdim=True) - counts)
        delta -= delta.mean(1, keepdim=True)
        for row, block in self.blocks.items():
            block.router.expert_bias.add_(delta[row])

    def wrap(self, read_loss: LossReader) -> LossReader:
        """The step's loss reader, closing the routing window where it reads (every rank, at window edges)."""
        return closing_windows(read_loss, self._close_window)

    def _close_window(self) -> None:
        both = torch.cat((self.window.flatten(), self.dropped.view(1)))
        if self.distributed:
            both = both.to(self.device)
            dist.all_reduce(both)
            both = both.cpu() / self.tp
        counts, dropped = both[:-1].view_as(self.window), float(both[-1])
        self.window.zero_()
        self.dropped.zero_()
        if self.timing:
            self.windows.append(window_figures(counts.numpy(), int(dropped), self.ep))
            self.total += counts
            self.total_dropped += dropped

    def start(self) -> None:
        """The timed window opens: what the warm-up routed is left out."""
        self.timing, self.windows = True, []
        self.window.zero_()
        self.dropped.zero_()

    def stop(self) -> None:
        self.timing = False
        if self.windows and self.window.numel():
            self.model["moe"] = {**self.facts, **window_figures(self.total.numpy(), int(self.total_dropped), self.ep),
                                 "windows": self.windows}  # fmt: skip
