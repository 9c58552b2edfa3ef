"""A MoE run's layout, torch-free: Llama's mesh (pp, dp_replicate, dp_shard, cp, tp; workloads/llama/layout.py) with
expert parallelism folded inside dp_shard x cp, as torchtitan folds it: the ep ranks of one group are neighbours
along the flattened dp_shard x cp dimension, each holds num_experts / ep experts, and the tokens of the group go to
the rank holding their expert by an all-to-all. Every check refuses in one line before any process starts.
"""

from __future__ import annotations

from dlperf.errors import ConfigError
from dlperf.spec import RunSpec, flag
from dlperf.workloads.llama.layout import LlamaLayout, check_shape, mesh_layout
from dlperf.workloads.moe.config import MoEConfig


def moe_layout(spec: RunSpec) -> LlamaLayout:
    """The mesh a spec asks for, with its experts, heads and expert-parallel size checked."""
    config: MoEConfig = spec.workload
    layout = mesh_layout(spec)
    check_experts(config, layout)
    check_heads(config, layout)
    check_shape(config, layout)
    if config.float8:  # torchao's grouped float8 is not wired in: refused, not run in bf16 under its name
        raise ConfigError(f"{flag('float8')} with --model moe is not built yet (docs/moe.md): drop it")
    return layout


def check_experts(config: MoEConfig, layout: LlamaLayout) -> None:
    if config.num_dense_layers > config.num_layers:
        raise ConfigError(
            f"{flag('num_dense_layers')} {config.num_dense_layers} is more than the {config.num_layers} blocks "
            f"({flag('num_layers')})"
        )
    if config.top_k > config.num_experts:
        raise ConfigError(
            f"{flag('top_k')} {config.top_k} is more than the {config.num_experts} routed experts "
            f"({flag('num_experts')}): lower it"
        )
    if config.num_experts % config.ep:
        raise ConfigError(
            f"{flag('num_experts')} {config.num_experts} is not divisible by {flag('ep')} {config.ep}: each "
            "expert-parallel rank holds an equal share of the experts"
        )
    folded = layout.dp_shard * layout.cp
    if folded % config.ep:
        raise ConfigError(
            f"{flag('ep')} {config.ep} does not divide dp_shard x cp = {layout.dp_shard} x {layout.cp} = {folded}: "
            "expert parallelism is folded inside the FSDP ranks; change --ep or the layout"
        )


def _check_rotary(config: MoEConfig) -> None:
    """The rotary part of a head (GQA's whole head, MLA's rope part) turns pairs: even and positive."""
    rotary = config.head_dim if config.attention == "gqa" else config.qk_rope_head_dim
    if rotary % 2 or rotary == 0:
        name = "head_dim" if config.attention == "gqa" else "qk_rope_head_dim"
        raise ConfigError(f"{flag(name)} {rotary} must be even and positive (rotary embeddings turn pairs)")


def check_heads(config: MoEConfig, layout: LlamaLayout) -> None:
    """GQA: whole query-head groups and an even head size; MLA: an even rotary part; both: heads split by tp."""
    if config.num_heads % layout.tp:
        kind = "MLA" if config.attention == "mla" else "attention"
        raise ConfigError(
            f"{kind}'s {flag('num_heads')} {config.num_heads} is not divisible by {flag('tp')} {layout.tp}"
        )
    _check_rotary(config)
    if config.attention == "gqa" and config.num_heads % config.num_kv_heads:
        raise ConfigError(
            f"{flag('num_heads')} {config.num_heads} is not divisible by {flag('num_kv_heads')} {config.num_kv_heads}"
        )
    if config.attention == "mla" and 0 in (config.kv_lora_rank, config.qk_nope_head_dim, config.v_head_dim):
        raise ConfigError(
            f"MLA needs a positive {flag('kv_lora_rank')}, {flag('qk_nope_head_dim')} and {flag('v_head_dim')}"
        )
