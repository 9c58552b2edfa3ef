"""The layout of a GPT run on PyTorch's own building blocks: one dp x pp x tp device mesh, DTensor tensor
parallelism, torch.distributed.pipelining stages, and DDP or FSDP2 over the data-parallel dimension.

Ranks are laid out row-major over (dp, pp, tp), as `init_device_mesh` numbers them: TP groups are
neighbouring ranks (one node's fast links first), pipeline stages next, data-parallel replicas outermost. The
mesh has a fourth dimension of size 1, dp_shard, so that FSDP2 can replicate over dp without sharding.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from dlperf.config import RunConfig
from dlperf.errors import ConfigError
from dlperf.workloads.gpt.model import GPT

PP_SCHEDULES = ("gpipe", "1f1b")
DP_MODES = ("ddp", "fsdp")


@dataclass(frozen=True)
class Layout:
    dp: int
    tp: int
    pp: int
    micro_batch_size: int
    global_batch_size: int
    pp_schedule: str
    dp_mode: str

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per iteration on each replica: pipeline micro-batches under PP, accumulation otherwise."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    def coordinates(self, rank: int) -> tuple[int, int, int]:
        """(dp, pp, tp) index of a global rank in the mesh."""
        return rank // (self.pp * self.tp), rank // self.tp % self.pp, rank % self.tp

    def as_record(self) -> dict[str, int | str]:
        return {
            "dp": self.dp,
            "tp": self.tp,
            "pp": self.pp,
            "micro_batch_size": self.micro_batch_size,
            "global_batch_size": self.global_batch_size,
            "accumulation_steps": self.accumulation_steps,
            "pp_schedule": self.pp_schedule if self.pp > 1 else None,
            "dp_mode": self.dp_mode if self.dp > 1 else None,
        }


def layout_of(config: RunConfig) -> Layout:
    """The layout a config asks for; refuses, in one line, any number that does not divide."""
    for name in ("tp", "pp", "micro_batch_size", "num_layers", "hidden_size", "num_heads", "seq_length", "vocab_size"):
        _positive(name, getattr(config, name))
    world = config.world_size
    if config.dp is None:
        if world % (config.tp * config.pp):
            raise ConfigError(
                f"world size {world} ({config.topology}) is not divisible by tp x pp = {config.tp} x {config.pp}: "
                f"change --devices-per-node, --tp or --pp"
            )
        dp = world // (config.tp * config.pp)
    else:
        _positive("dp", config.dp)
        dp = config.dp
        if dp * config.tp * config.pp != world:
            raise ConfigError(
                f"world size {world} ({config.topology}) does not equal dp x tp x pp = "
                f"{dp} x {config.tp} x {config.pp} = {dp * config.tp * config.pp}: change the topology or the layout"
            )
    global_batch = config.global_batch_size if config.global_batch_size is not None else config.micro_batch_size * dp
    _positive("global_batch_size", global_batch)
    if global_batch % (config.micro_batch_size * dp):
        raise ConfigError(
            f"--global-batch-size {global_batch} is not divisible by micro batch x dp = "
            f"{config.micro_batch_size} x {dp} = {config.micro_batch_size * dp}"
        )
    if config.hidden_size % config.num_heads:
        raise ConfigError(f"--hidden-size {config.hidden_size} is not divisible by --num-heads {config.num_heads}")
    if config.num_heads % config.tp:
        raise ConfigError(f"--num-heads {config.num_heads} is not divisible by --tp {config.tp}")
    if config.num_layers < config.pp:
        raise ConfigError(f"--num-layers {config.num_layers} is fewer than the --pp {config.pp} pipeline stages")
    if config.pp_schedule not in PP_SCHEDULES:
        raise ConfigError(f"unknown --pp-schedule {config.pp_schedule!r}: choose one of {', '.join(PP_SCHEDULES)}")
    if config.dp_mode not in DP_MODES:
        raise ConfigError(f"unknown --dp-mode {config.dp_mode!r}: choose one of {', '.join(DP_MODES)}")
    return Layout(dp, config.tp, config.pp, config.micro_batch_size, global_batch, config.pp_schedule, config.dp_mode)


def _positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")


def build_mesh(layout: Layout, device: torch.device):
    """The (dp, dp_shard, pp, tp) mesh. dp_shard has size 1: over ("dp", "dp_shard") FSDP2 replicates every
    parameter and all-reduces gradients (HSDP without sharding), which is DDP for DTensor parameters."""
    from torch.distributed.device_mesh import init_device_mesh

    shape = (layout.dp, 1, layout.pp, layout.tp)
    return init_device_mesh(device.type, shape, mesh_dim_names=("dp", "dp_shard", "pp", "tp"))


def stage_layers(num_layers: int, pp: int, stage: int) -> range:
    """Contiguous blocks of layers; the first `num_layers % pp` stages take one more."""
    base, extra = divmod(num_layers, pp)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (stage < extra))


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


def grad_sync(model: nn.Module, enabled: bool) -> AbstractContextManager:
    """Skip the dp gradient reduction on all but the last accumulation micro-batch."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return nullcontext() if enabled else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2, sharding or replicating
        model.set_requires_gradient_sync(enabled)
    return nullcontext()


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
