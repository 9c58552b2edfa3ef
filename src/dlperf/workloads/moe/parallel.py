"""Expert parallelism on PyTorch's own building blocks, as torchtitan builds it: the experts' stacked weights are
DTensors sharded along the expert dimension over the ep ranks and FSDP2-sharded over the rest of dp_shard x cp
(and replicated over dp_replicate); every other weight is FSDP2's over the whole of dp_shard x cp (Llama's
`apply_fsdp`). A MoE block's picks go to the rank holding their expert and come back by
`all_to_all_single` with uneven splits, through the functional collectives' autograd-aware version.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from dlperf.workloads.llama import parallel as llama_parallel
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.moe.model import GroupedExperts, LatentAttention, MoE, MoETransformer

EXPERT_DIMS = ("pp", "dp_replicate", "efsdp", "ep", "tp")


def expert_mesh(layout: LlamaLayout, ep: int, device: torch.device):
    """(pp, dp_replicate, efsdp, ep, tp) over the world: ep neighbours along the flattened dp_shard x cp (at one tp
    rank) share a token exchange; efsdp are the ranks of a stage holding the same experts."""
    from torch.distributed.device_mesh import DeviceMesh

    folded = layout.dp_shard * layout.cp
    ranks = torch.arange(layout.world_size).view(layout.pp, layout.dp_replicate, folded // ep, ep, layout.tp)
    return DeviceMesh(device.type, ranks, mesh_dim_names=EXPERT_DIMS)


def shard_experts(model: MoETransformer, mesh, layout: LlamaLayout, param_dtype: torch.dtype | None) -> None:
    """Each MoE block's experts split over `ep` (Shard(0)) and FSDP2-sharded over efsdp (HSDP over dp_replicate),
    and the block's tokens exchanged by the Dispatcher. Each rank's expert gradient sums the picks of its whole ep
    group, so FSDP2's mean over the efsdp ranks is ep times the data-parallel mean: the experts scale their
    gradient by 1 / ep (torchtitan sets FSDP2's divide factor instead, a PREMUL_SUM reduction gloo does not have)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Shard, distribute_module, distribute_tensor

    def split(name: str, module: torch.nn.Module, ep_mesh) -> None:
        for key, parameter in list(module.named_parameters(recurse=False)):
            sharded = torch.nn.Parameter(distribute_tensor(parameter, ep_mesh, [Shard(0)], src_data_rank=None))
            module.register_parameter(key, sharded)

    dims = ("dp_replicate", "efsdp") if layout.dp_replicate > 1 else ("efsdp",)
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    group = mesh["ep"].get_group()
    for moe in model.moe_blocks().values():
        distribute_module(moe.experts, mesh["ep"], split)
        fully_shard(moe.experts, mesh=mesh[dims], mp_policy=policy)
        # FSDP2 averages over dp / ep ranks: the whole dp's mean is 1 / ep of it
        moe.experts.grad_scale = 1 / mesh["ep"].size()
        moe.dispatcher = Dispatcher(group)


class Dispatcher:
    """One MoE block's exchange over its ep group: the picks (sorted by global expert) sent to their experts'
    ranks, run there sorted by local expert, and sent back in the order they came."""

    def __init__(self, group) -> None:
        self.group, self.ep = group, dist.get_world_size(group)

    def __call__(self, experts: GroupedExperts, rows: torch.Tensor, counts: torch.Tensor, grouped: bool):
        from torch.distributed._functional_collectives import all_to_all_single_autograd

        local = counts.numel() // self.ep
        received = torch.empty_like(counts)
        dist.all_to_all_single(received, counts, group=self.group)  # each source's counts for my experts
        received = received.view(self.ep, local)
        send = counts.view(self.ep, local).sum(1).tolist()
        recv = received.sum(1).tolist()
        inbound = all_to_all_single_autograd(rows, recv, send, self.group)
        expert = torch.repeat_interleave(torch.arange(local, device=counts.device).repeat(self.ep), received.flatten())
        order = expert.argsort(stable=True)
        done = experts(inbound[order], received.sum(0), grouped)
        back = torch.empty_like(order)
        back[order] = torch.arange(order.numel(), device=order.device)
        return all_to_all_single_autograd(done[back].contiguous(), send, recv, self.group)


def apply_tp(model: MoETransformer, tp_mesh) -> None:
    """Llama's tensor and sequence parallelism on the attention, the dense feed-forwards and the embedding and
    output; MLA's heads split as torchtitan splits them (wq or wq_b and wkv_b column-wise, wo row-wise; the shared
    latent's wkv_a, kv_norm and the query's wq_a, q_norm replicated). A MoE block takes the whole sequence and
    every expert on each tp rank (the same tokens, the same routing; no expert tensor parallelism) and gives its
    sequence slice back."""
    from torch.distributed.tensor import distribute_module

    llama_parallel.apply_tp(model, tp_mesh, float8=False, block_plan=moe_block_plan)
    for _, block in model.blocks():
        if isinstance(block.attention, LatentAttention):
            for name in ("wkv_a", "kv_norm", "wq_a", "q_norm"):
                if hasattr(block.attention, name):
                    distribute_module(getattr(block.attention, name), tp_mesh)


def moe_block_plan(block: str, layer, styles: tuple[type, type, type]) -> dict:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import PrepareModuleInputOutput, SequenceParallel

    plan = {f"{block}.attention_norm": SequenceParallel(), f"{block}.ffn_norm": SequenceParallel()}
    if isinstance(layer.attention, LatentAttention):
        plan.update(latent_attention_plan(block, layer.attention, styles))
    else:
        plan.update(llama_parallel.attention_plan(block, styles))
    if isinstance(layer.feed_forward, MoE):
        plan[f"{block}.feed_forward"] = PrepareModuleInputOutput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_input=True,
            output_layouts=(Replicate(),), desired_output_layouts=(Shard(1),),
        )  # fmt: skip
    else:
        plan.update(llama_parallel.feed_forward_plan(block, styles))
    return plan


def latent_attention_plan(block: str, attention: LatentAttention, styles: tuple[type, type, type]) -> dict:
    from torch.distributed.tensor import Replicate, Shard

    colwise, rowwise, prepare_input = styles
    name = f"{block}.attention"
    query = "wq" if hasattr(attention, "wq") else "wq_b"
    return {
        name: prepare_input(input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)),
        f"{name}.{query}": colwise(),
        f"{name}.wkv_b": colwise(),
        f"{name}.wo": rowwise(output_layouts=Shard(1)),
    }
