"""Mixture-of-experts pre-training (routed SwiGLU experts, top-k routing, shared experts, dense first blocks, GQA or
DeepSeek's MLA) on Llama's mesh with expert parallelism folded inside dp_shard x cp: the definition, torch-free.
The step is torch_step.py (model.py, parallel.py); the layout is layout.py. FLOPs count the active experts only
(6 x active non-embedding parameters + attention, MLA's own head sizes), in the PaLM and MaxText conventions.
"""

from __future__ import annotations

from typing import Any

from dlperf.metrics import flops
from dlperf.spec import RunSpec
from dlperf.workloads.base import PlausibleWork, WorkloadPlan
from dlperf.workloads.llama import LlamaWorkload, report_group, size_token
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.moe.config import DEFAULT_AUX_LOSS_COEF, SIZES, MoEConfig, parameter_counts
from dlperf.workloads.moe.layout import moe_layout

__all__ = ["MoEConfig", "MoEWorkload"]

# the shape values the case name does not hold, with their token in the record's `work`
WORK_TOKENS = (("num_experts", "e"), ("top_k", "k"), ("moe_ffn_hidden_size", "effn"), ("num_heads", "nh"),
               ("vocab_size", "v"), ("num_dense_layers", "dense"))  # fmt: skip


def routing_tag(config: MoEConfig) -> str:
    """`balanced`, or the learned router's balancing (`bias`, `aux1e-03`, `none`), and `cf1.25` where it drops."""
    tag = "balanced" if config.routing == "balanced" else config.load_balance
    if config.routing == "learned" and config.load_balance == "aux":
        tag += f"{config.aux_loss_coef:g}" if config.aux_loss_coef != DEFAULT_AUX_LOSS_COEF else ""
    return tag + (f"_cf{config.capacity_factor:g}" if config.capacity_factor is not None else "")


def layout_name(layout: LlamaLayout, ep: int) -> str:
    name = layout.name()
    return name if ep == 1 else f"{name}_ep{ep}".removeprefix("single_")


def report_case(config: MoEConfig, layout: LlamaLayout) -> str:
    """Size, layout, routing, sequence and batch as the peers' tables name a run:
    `deepseek-v3_fsdp8_ep8_balanced_s4096_gbs8`."""
    name = f"{size_token(config, SIZES, '', 'moe-')}_{layout_name(layout, config.ep)}_{routing_tag(config)}"
    return f"{name}_s{config.seq_length}_gbs{layout.global_batch_size}"


class MoEWorkload(LlamaWorkload):
    name = "moe"
    config_type = MoEConfig
    title = "Mixture of experts (--model moe)"
    builders = {"torch": "dlperf.workloads.moe.torch_step:build", "jax": "dlperf.workloads.moe.jax_step:build"}
    report_title = "MoE"
    flops_formula = "(6N_active + 12·L·H·Q·T) per token"
    plausible = PlausibleWork("a DeepSeek-V3 sequence", ("deepseek_v3", "deepseek-v3", "qwen3_moe", "mixtral"), 1e14)
    predictor = "dlperf.workloads.moe.predict:PREDICTOR"

    sizes = SIZES

    checked_layout = staticmethod(moe_layout)

    work_tokens = WORK_TOKENS

    case_name = staticmethod(report_case)

    def layout_fields(self, config: MoEConfig, layout: LlamaLayout) -> dict[str, Any]:
        """Llama's report group with `EP` joined where experts are sharded (`FSDP+EP`), and the EP degree."""
        kinds = report_group(layout)
        group = kinds if config.ep == 1 else ("" if kinds == "single" else kinds + "+") + "EP"
        return {"report_group": group, "parallel": {**layout.as_record(), "ep": config.ep}}

    formulas = (
        "6N_active + 12·L·H·Q·T per token (the PaLM formula over the routed experts a token uses, top_k of them, and "
        "the shared ones; N_active without the token embedding; MLA: Q = (qk_nope + qk_rope + v) / 2)",
        "6N_active + 6·L·H·Q·T per token (MaxText's: the attention term halved for the causal mask)",
    )

    def flops_per_token(self, config: MoEConfig, causal: bool = False) -> int:
        """The PaLM count over the active experts (torchtitan's), or with `causal` MaxText's: 6 x the active
        parameters without the token embedding, plus attention's scores and weighted values at its own head sizes
        (MLA: (qk_nope + qk_rope + v) / 2 per head, which is GQA's head_dim where all three are equal)."""
        counts = parameter_counts(config)
        if config.attention == "mla":
            head = (config.qk_nope_head_dim + config.qk_rope_head_dim + config.v_head_dim) / 2
        else:
            head = config.head_dim
        count = flops.llm_flops_per_token_causal if causal else flops.llm_flops_per_token
        return int(
            count(counts.active - counts.embedding, config.num_layers, config.num_heads, head, config.seq_length)
        )

    def derived_metrics(self, spec: RunSpec, plan: WorkloadPlan, throughput: float) -> dict[str, Any]:
        """Llama's, over the active experts (the MFU basis), with the total and active parameters."""
        counts = parameter_counts(spec.workload)
        fields = super().derived_metrics(spec, plan, throughput)
        return {**fields, "parameters_total": counts.total, "parameters_active": counts.active}

    def total_parameters(self, config: MoEConfig) -> int:
        return parameter_counts(config).total
