"""A Llama layout (layout.py) on PyTorch's own building blocks, applied in torchtitan's order: tensor and sequence
parallelism (DTensor), activation checkpointing, compiling block by block, then FSDP2 (`fully_shard`) over the
data-parallel and context-parallel ranks; context parallelism (`context_parallel`) wraps each forward and backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from functools import partial

import torch

from dlperf.engines.torch.cpu_ring_attention import cpu_ring_attention
from dlperf.workloads.llama.layout import DIMS, LlamaLayout
from dlperf.workloads.llama.model import Llama


def build_mesh(layout: LlamaLayout, device: torch.device):
    """The (pp, dp_replicate, dp_shard, cp, tp) mesh, with dp_shard x cp flattened: the ranks FSDP2 shards over."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, layout.shape, mesh_dim_names=DIMS)
    mesh["dp_shard", "cp"]._flatten("dp_shard_cp")
    return mesh


def apply_tp(model: Llama, tp_mesh, float8: bool, block_plan: Callable[..., dict] | None = None) -> None:
    """Megatron's split with sequence parallelism: norms and residuals hold a slice of the sequence (Shard(1)); each
    block gathers it before attention and the feed-forward (column-wise q/k/v, w1, w3) and scatters it back after
    (row-wise wo, w2); the embedding is vocab-parallel and the output layer's logits are gathered for the loss.
    Under `float8` (the blocks' linears already torchao's) the blocks take torchao's float8 styles, as torchtitan
    does: the gathered inputs are cast before the all-gather, with one tensor-wide scale over the ranks' slices.
    `block_plan(prefix, block, styles)` gives a block's entries (Llama's: `block_plan`; the MoE workload's own)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module

    styles = _block_styles(float8)
    plan: dict = {}
    if model.tok_embeddings is not None:
        plan["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
    if model.output is not None:
        plan["norm"] = SequenceParallel()
        plan["output"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    for name, layer in model.layers.items():
        plan.update((block_plan or llama_block_plan)(f"layers.{name}", layer, styles))
    parallelize_module(model, tp_mesh, plan)


def llama_block_plan(block: str, layer, styles: tuple[type, type, type]) -> dict:
    """A Llama block's entries: its norms sequence-parallel, attention and feed-forward each as `attention_plan`
    and `feed_forward_plan` give them."""
    from torch.distributed.tensor.parallel import SequenceParallel

    return {
        f"{block}.attention_norm": SequenceParallel(),
        **attention_plan(block, styles),
        f"{block}.ffn_norm": SequenceParallel(),
        **feed_forward_plan(block, styles),
    }


def attention_plan(block: str, styles: tuple[type, type, type]) -> dict:
    """Grouped-query attention: the sequence gathered, q/k/v column-wise, wo row-wise back to a sequence slice."""
    from torch.distributed.tensor import Replicate, Shard

    colwise, rowwise, prepare_input = styles
    return {
        f"{block}.attention": prepare_input(
            input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)
        ),
        **{f"{block}.attention.{w}": colwise() for w in ("wq", "wk", "wv")},
        f"{block}.attention.wo": rowwise(output_layouts=Shard(1)),
    }


def feed_forward_plan(block: str, styles: tuple[type, type, type]) -> dict:
    """SwiGLU: the sequence gathered, w1 and w3 column-wise, w2 row-wise back to a sequence slice."""
    from torch.distributed.tensor import Replicate, Shard

    colwise, rowwise, prepare_input = styles
    return {
        f"{block}.feed_forward": prepare_input(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        f"{block}.feed_forward.w1": colwise(),
        f"{block}.feed_forward.w2": rowwise(output_layouts=Shard(1)),
        f"{block}.feed_forward.w3": colwise(),
    }


def _block_styles(float8: bool) -> tuple[type, type, type]:
    """(column-wise, row-wise, input-gathering) styles for the blocks: torch's, or torchao's float8 subclasses of
    them (the same split; the activations and gradients cross the ranks cast to float8)."""
    if float8:
        from torchao.float8.float8_tensor_parallel import (
            Float8ColwiseParallel,
            Float8RowwiseParallel,
            PrepareFloat8ModuleInput,
        )

        return Float8ColwiseParallel, Float8RowwiseParallel, PrepareFloat8ModuleInput
    from torch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel

    return ColwiseParallel, RowwiseParallel, PrepareModuleInput


def _selective_policy(ctx, op, *args, **kwargs):
    """Keep what is costly to recompute, the matmuls' and attention's outputs and the reduce-scatters of sequence
    parallelism, and (as torchtitan keeps it for low-precision training) `max`, the amax a float8 scale is computed
    from; recompute the rest (norms, rotary, activations) in backward.

    Float8 matmuls: torchao's Float8Linear reaches this policy as `aten.mm` on its float8 tensor subclass (the
    subclass turns it into `_scaled_mm` below the checkpoint's dispatch mode), so `mm` keeps it, which is how
    torchtitan's list (`_op_sac_save_list`, torchtitan/models/llama3/infra/parallelize.py) keeps float8 matmuls
    without naming `_scaled_mm`. Where the policy sees `_scaled_mm` itself (a float8 matmul called directly, as
    torchao's newer recipes do, or a region traced with the subclass desugared) it is kept too: without it each
    float8 matmul ran twice per step and float8's speed was understated."""
    from torch.utils.checkpoint import CheckpointPolicy

    saved = {
        torch.ops.aten.mm.default,
        torch.ops.aten._scaled_mm.default,
        torch.ops.aten._scaled_dot_product_efficient_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_cudnn_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
        torch.ops._c10d_functional.reduce_scatter_tensor.default,
        torch.ops.aten.max.default,
    }
    return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE


def apply_checkpointing(model: Llama, mode: str) -> None:
    """Wrap each block: `full` keeps only its input, `selective` the outputs `_selective_policy` names."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    options = {"context_fn": partial(create_selective_checkpoint_contexts, _selective_policy)}
    for name, block in list(model.layers.items()):
        model.layers[name] = checkpoint_wrapper(
            block, preserve_rng_state=False, **(options if mode == "selective" else {})
        )


def apply_fsdp(model: Llama, mesh, layout: LlamaLayout, param_dtype: torch.dtype | None) -> None:
    """FSDP2 per block and over the whole stage: sharded over dp_shard x cp, replicated over dp_replicate (HSDP,
    a 2-D mesh); `param_dtype` (bf16 under amp-bf16) is what the all-gathers carry and the matmuls read, with
    gradients reduced in fp32, as torchtitan's mixed precision."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    dp_mesh = mesh["dp_replicate", "dp_shard_cp"] if layout.dp_replicate > 1 else mesh["dp_shard_cp"]
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for block in model.layers.values():
        fully_shard(block, mesh=dp_mesh, mp_policy=policy)
    fully_shard(model, mesh=dp_mesh, mp_policy=policy)


def apply_float8(model: Llama, fsdp: bool) -> None:
    """torchao's float8 training for every linear layer of the blocks (dynamic tensor-wise scales); the output
    layer stays in bf16, as torchtitan leaves it. Under FSDP the weights' all-gathers carry float8 (each shard cast
    with the whole weight's scale), as torchtitan's `enable_fsdp_float8_all_gather`: the scales are then computed
    after each optimizer step (precompute_float8_scales)."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    convert_to_float8_training(
        model,
        config=Float8LinearConfig(enable_fsdp_float8_all_gather=fsdp),
        module_filter_fn=lambda module, fqn: fqn.startswith("layers."),
    )


def precompute_float8_scales(modules: Sequence[Llama]) -> None:
    """The float8 scales of the FSDP-sharded weights for the next all-gathers, one all-reduce of their amaxes per
    module (torchao's `precompute_float8_dynamic_scale_for_fsdp`), after the optimizer changed them."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

    for module in modules:
        precompute_float8_dynamic_scale_for_fsdp(module)


def context_parallel(cp_mesh, modules: Sequence[Llama]) -> Callable[..., AbstractContextManager]:
    """(inputs, labels) -> a context under which SDPA runs ring attention over the cp ranks: the two (copies the
    caller owns) and every stage's rotary tables are split along the sequence in load-balanced chunks, in place,
    while it is open; the tables are restored on leaving. On a CPU mesh the ring runs over the CPU attention kernel
    (cpu_ring_attention.py)."""
    from torch.distributed.tensor.experimental import context_parallel as torch_context_parallel

    tables = [t for m in modules for t in (m.rope_cos, m.rope_sin)]

    def opened(*batch: torch.Tensor) -> AbstractContextManager:
        region = ExitStack()
        region.enter_context(
            torch_context_parallel(
                cp_mesh,
                buffers=[*batch, *tables],
                buffer_seq_dims=[1] * len(batch) + [0] * len(tables),
                no_restore_buffers=set(batch),
            )
        )
        if cp_mesh.device_type == "cpu":
            region.enter_context(cpu_ring_attention())
        return region

    return opened


def uses_fsdp(layout: LlamaLayout) -> bool:
    """FSDP2 averages gradients wherever ranks hold the same parameters: over data- or context-parallel ranks."""
    return layout.dp * layout.cp > 1
