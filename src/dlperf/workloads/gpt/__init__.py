"""GPT pre-training with data, tensor and pipeline parallelism (the published GPT report's cases): the
definition, torch-free. The steps are torch_step.py (model.py, parallel.py) and jax_step.py (jax_model.py), over
the language models' shared parts (workloads/language_model/); both read the plan's layout."""

from __future__ import annotations

from typing import Any

from dlperf.errors import ConfigError
from dlperf.metrics import flops
from dlperf.metrics.footprint import Footprint, activation_bytes_per_element, state_bytes
from dlperf.spec import RunSpec, flag
from dlperf.workloads.base import PlausibleWork, Workload, WorkloadPlan, layout_plan, variant_tag
from dlperf.workloads.gpt import cases
from dlperf.workloads.gpt.config import DEFAULT_LR, GPTConfig
from dlperf.workloads.gpt.layout import Layout, layout_of, padded_vocab
from dlperf.workloads.language_model.tokens import open_token_file

__all__ = ["GPTConfig", "GPTWorkload"]


def gpt_variant(spec: RunSpec, layout: Layout) -> str:
    """The switches that change speed but not the layout name: the pipeline schedule, FSDP."""
    schedule = layout.pp_schedule if layout.pp > 1 else ""
    return variant_tag(spec, schedule, layout.dp_mode if layout.dp > 1 and layout.dp_mode != "ddp" else "")


def work_tag(spec: RunSpec) -> str:
    """The shape values the group's short name does not hold (sequence length, heads, vocabulary), where they
    differ from the published case: the record's `work`, part of the reports' series key."""
    config: GPTConfig = spec.workload
    return "_".join(
        f"{token}{getattr(config, key)}"
        for key, token in (("seq_length", "s"), ("num_heads", "nh"), ("vocab_size", "v"))
        if getattr(config, key) != getattr(GPTConfig, key)
    )


class GPTWorkload(Workload):
    name = "gpt"
    config_type = GPTConfig
    title = "GPT (--model gpt)"
    builders = {"torch": "dlperf.workloads.gpt.torch_step:build", "jax": "dlperf.workloads.gpt.jax_step:build"}
    batch_key = "micro_batch_size"
    report_title = "GPT"
    flops_formula = "72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) where not counted"
    plausible = PlausibleWork("a 175B GPT-3 sequence (2048 tokens)", ("gpt3", "gpt-3"), 1e15)

    def expand(self, values: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
        """A named case fills every value the user did not give explicitly."""
        case = values.get("case")
        if not case:
            return values
        if not isinstance(case, str):
            return values  # the type check names it
        filled = cases.case_values(case)
        return {**values, **{k: v for k, v in filled.items() if k not in explicit}}

    def validate(self, spec: RunSpec) -> None:
        config: GPTConfig = spec.workload
        layout = layout_of(spec)
        if spec.engine == "jax" and layout.pp > 1:
            raise ConfigError(
                f"the JAX step has no pipeline parallelism ({flag('pp')} {layout.pp}): "
                f"use {flag('pp')} 1 or {flag('engine')} torch"
            )
        if spec.data != "synthetic":
            open_token_file(spec.data, config.vocab_size, config.seq_length)

    def plan(self, spec: RunSpec) -> WorkloadPlan:
        layout = layout_of(spec)
        group = f"{cases.short_name(spec, layout.dp, layout.global_batch_size)}_{gpt_variant(spec, layout)}"
        # the stem: the group as the console and the report show it, then the log name that holds every shape value
        # (heads, micro-batch, sequence) the short name leaves out: DP_8x1x1 and 2D_8x1x1 stay apart
        stem = f"{group}_{cases.log_name(spec, layout.dp, layout.global_batch_size)}"
        lr = spec.workload.lr if spec.workload.lr is not None else DEFAULT_LR
        return layout_plan(layout, group, stem, lr, {
            "report_case": cases.short_name(spec, layout.dp, layout.global_batch_size),
            "report_group": cases.name_prefix(spec, layout.dp),
            "parallel": layout.as_record(),
            "work": work_tag(spec),
        })  # fmt: skip

    def derived_metrics(self, spec: RunSpec, plan: WorkloadPlan, throughput: float) -> dict[str, Any]:
        """Tokens/s and the published formula's FLOPs; where no count exists the formula is the MFU basis
        (orchestration/evidence_fields.py `flops_fields` computes MFU for every workload)."""
        config: GPTConfig = spec.workload
        layout: Layout = plan.layout
        vocab = padded_vocab(config.vocab_size, layout.tp)
        formula = flops.gpt_flops_per_iteration(
            layout.global_batch_size, config.seq_length, config.num_layers, config.hidden_size, vocab
        )
        return {
            "flops_per_iteration_formula": formula,
            "flops_formula": "Narayanan et al. 2021, eq. 3 without recomputation (metrics/flops.py)",
            "tokens_per_s": throughput * config.seq_length,
            "tokens_per_s_per_device": throughput * config.seq_length / spec.world_size,
        }

    def footprint(self, spec: RunSpec, plan: WorkloadPlan) -> Footprint:
        """The first pipeline stage's rank (it holds the embeddings and the most micro-batches in flight).

        Parameters: l(12h² + 13h) + Vh + sh + 2h. Activations per layer and micro-batch, from Korthikanti et
        al., "Reducing Activation Recomputation in Large Transformer Models" (2022), for tensor parallelism
        without sequence parallelism: s·b·h·(10 + 24/t) bytes at 16 bits (doubled for fp32), the paper's figure
        without the 5·a·s²·b attention-score term that scaled_dot_product_attention's fused kernels do not keep;
        plus the logits and their gradient (fp32).
        """
        config: GPTConfig = spec.workload
        layout: Layout = plan.layout
        h, s, layers = config.hidden_size, config.seq_length, config.num_layers
        tp, pp = layout.tp, layout.pp
        vocab = padded_vocab(config.vocab_size, tp)
        layer_params = 12 * h * h + 13 * h
        params_total = layers * layer_params + vocab * h + s * h + 2 * h
        params_rank = -(-layers // pp) * layer_params // tp + vocab * h // tp + s * h + 2 * h
        in_flight = 1 if pp == 1 else (layout.accumulation_steps if layout.pp_schedule == "gpipe" else pp)
        b = layout.micro_batch_size
        per_layer = s * b * h * (10 + 24 / tp) * activation_bytes_per_element(spec.precision) / 2
        logits = 2 * 4 * b * s * vocab / tp
        return Footprint(
            params_total=params_total,
            params_per_rank=params_rank,
            state_bytes=state_bytes(params_rank, "adamw", spec.precision),
            activation_bytes=int(in_flight * (-(-layers // pp) * per_layer) + logits),
        )
