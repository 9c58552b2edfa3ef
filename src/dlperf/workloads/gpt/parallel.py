"""A GPT layout (layout.py) on PyTorch's own building blocks: one dp x pp x tp device mesh, DTensor tensor
parallelism, torch.distributed.pipelining stages, and DDP or FSDP2 over the data-parallel dimension.

The mesh has a fourth dimension of size 1, dp_shard, so that FSDP2 can replicate over dp without sharding.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from dlperf.engines.torch.pipeline import stage_layers
from dlperf.workloads.gpt.layout import Layout
from dlperf.workloads.gpt.model import GPT


def build_mesh(layout: Layout, device: torch.device):
    """The (dp, dp_shard, pp, tp) mesh. dp_shard has size 1: over ("dp", "dp_shard") FSDP2 replicates every
    parameter and all-reduces gradients (HSDP without sharding), which is DDP for DTensor parameters."""
    from torch.distributed.device_mesh import init_device_mesh

    shape = (layout.dp, 1, layout.pp, layout.tp)
    return init_device_mesh(device.type, shape, mesh_dim_names=("dp", "dp_shard", "pp", "tp"))


def keep_stage(model: GPT, stage: int, pp: int) -> None:
    """Delete what other stages hold: embeddings live on the first, final norm and output on the last."""
    keep = stage_layers(len(model.layers), pp, stage)
    for name in list(model.layers):
        if int(name) not in keep:
            del model.layers[name]
    if stage > 0:
        model.tok_emb = model.pos_emb = None
    if stage < pp - 1:
        model.norm = model.output = None


def apply_tp(model: GPT, tp_mesh) -> None:
    """Megatron's split: column-wise q/k/v and MLP-in, row-wise attention-out and MLP-out, vocab-parallel
    embedding and output (logits gathered for the loss); the tie is restored on the sharded weight."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {}
    if model.tok_emb is not None:
        plan["tok_emb"] = RowwiseParallel(input_layouts=Replicate())
    if model.output is not None:
        plan["output"] = ColwiseParallel(output_layouts=Replicate())
    for name in model.layers:
        plan.update(
            {
                f"layers.{name}.attn.wq": ColwiseParallel(),
                f"layers.{name}.attn.wk": ColwiseParallel(),
                f"layers.{name}.attn.wv": ColwiseParallel(),
                f"layers.{name}.attn.wo": RowwiseParallel(),
                f"layers.{name}.mlp.fc_in": ColwiseParallel(),
                f"layers.{name}.mlp.fc_out": RowwiseParallel(),
            }
        )
    parallelize_module(model, tp_mesh, plan)
    model.tie_weights()


def apply_dp(model: GPT, mesh, mode: str, device: torch.device, tp: int, pipelined: bool) -> nn.Module:
    """Gradients averaged over the dp dimension only: DDP, or FSDP2 sharding per block (`--dp-mode fsdp`).

    DDP cannot hold DTensor parameters, so under TP or PP the DDP semantics come from FSDP2 over the
    (dp, dp_shard=1) mesh: full replicas, gradients all-reduced per block, composing with DTensor.
    """
    from torch.distributed.fsdp import fully_shard

    if mode == "ddp" and tp == 1 and not pipelined:
        device_ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids, process_group=mesh["dp"].get_group())
    dp_mesh = mesh["dp"] if mode == "fsdp" else mesh["dp", "dp_shard"]
    for block in model.layers.values():
        fully_shard(block, mesh=dp_mesh)
    fully_shard(model, mesh=dp_mesh)
    return model


class TiedEmbeddingSync:
    """Under PP the first stage's embedding and the last stage's output hold copies of one weight (same
    initial values); like Megatron, their gradients are summed between the two stages before each step.
    torch.distributed.pipelining has no notion of weights shared across stages, so this is the one
    reduction done here by hand."""

    def __init__(self, layout: Layout, rank: int, model: GPT) -> None:
        self.group = None
        for d in range(layout.dp):
            for t in range(layout.tp):
                ends = [d * layout.pp * layout.tp + t, d * layout.pp * layout.tp + (layout.pp - 1) * layout.tp + t]
                group = dist.new_group(ends)  # every rank creates every group, in the same order
                if rank in ends:
                    self.group = group
        # the module, not its weight: FSDP2 swaps parameters for DTensor ones when wrapping
        self.holder = model.tok_emb if model.tok_emb is not None else model.output

    def __call__(self) -> None:
        weight = None if self.holder is None else self.holder.weight
        if weight is None or weight.grad is None:
            return
        grad = weight.grad
        if hasattr(grad, "placements") and grad.placements != weight.placements:
            # a TP embedding's gradient arrives replicated: keep this rank's shard, as the weight holds
            grad = weight.grad = grad.redistribute(placements=weight.placements)
        local = grad.to_local() if hasattr(grad, "to_local") else grad
        dist.all_reduce(local, group=self.group)
