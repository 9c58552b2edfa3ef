"""Llama 3 pre-training (RMSNorm, SwiGLU, rotary embeddings, grouped-query attention, untied output) on one device
mesh of FSDP2/HSDP, tensor and sequence parallelism, pipeline schedules and context parallelism: the definition,
torch-free. The steps are torch_step.py (model.py, parallel.py) and jax_step.py (jax_model.py); both read the plan's
layout (layout.py). MFU follows the PaLM formula (metrics/flops.py), as torchtitan, MaxText and NeMo report it.
"""

from __future__ import annotations

from typing import Any

from dlperf.errors import ConfigError
from dlperf.metrics import flops
from dlperf.metrics.footprint import Footprint, activation_bytes_per_element, state_bytes
from dlperf.spec import RunSpec
from dlperf.workloads.base import PlausibleWork, Workload, WorkloadPlan, layout_plan, variant_tag
from dlperf.workloads.language_model.tokens import open_token_file
from dlperf.workloads.llama.config import DEFAULT_LR, SIZES, LlamaConfig, parameter_counts
from dlperf.workloads.llama.layout import LlamaLayout, layout_of

__all__ = ["LlamaConfig", "LlamaWorkload"]

FLOAT8_NEEDS_GPU = "float8 training (--float8) needs a CUDA GPU of compute capability 8.9 or newer: drop --float8"
# the shape values that the case name does not hold, with their token in the record's `work`
WORK_TOKENS = (("num_heads", "nh"), ("num_kv_heads", "kv"), ("ffn_hidden_size", "ffn"), ("vocab_size", "v"))


def size_token(
    config: LlamaConfig, sizes: dict[str, dict] = SIZES, named: str = "llama3-", shaped: str = "llama3-"
) -> str:
    """`llama3-8b` where the shape is the named size's, else `llama3-<hidden>x<layers>` as GPT names its shapes (the
    MoE's: `deepseek-v3`, `moe-<hidden>x<layers>`)."""
    own = sizes[config.size]
    if all(getattr(config, key) == own[key] for key in own if key != "seq_length"):
        return f"{named}{config.size}"
    return f"{shaped}{config.hidden_size}x{config.num_layers}"


def report_case(config: LlamaConfig, layout: LlamaLayout) -> str:
    """Size, layout, sequence and batches as the peers' tables name a run: `llama3-8b_fsdp8_s8192_gbs8`; the micro
    batch follows where an iteration holds several (`_mbs1`)."""
    name = f"{size_token(config)}_{layout.name()}_s{config.seq_length}_gbs{layout.global_batch_size}"
    return name + (f"_mbs{layout.micro_batch_size}" if layout.accumulation_steps > 1 else "")


def report_group(layout: LlamaLayout) -> str:
    """The kinds of parallelism in use (`FSDP+TP`, `HSDP`, `PP+FSDP`), or `single`."""
    kinds = [kind for kind, size in (("PP", layout.pp), ("CP", layout.cp), ("TP", layout.tp)) if size > 1]
    if layout.dp_replicate > 1:
        kinds.insert(int(layout.pp > 1), "HSDP" if layout.dp_shard > 1 else "DDP")
    elif layout.dp_shard > 1:
        kinds.insert(int(layout.pp > 1), "FSDP")
    return "+".join(kinds) or "single"


def llama_variant(spec: RunSpec, layout: LlamaLayout) -> str:
    """The switches that change speed but not the case name: float8, activation checkpointing, the schedule."""
    config: LlamaConfig = spec.workload
    checkpoint = f"ac-{config.activation_checkpoint}" if config.activation_checkpoint != "none" else ""
    stages = f"-v{layout.stages_per_rank}" if layout.stages_per_rank > 2 else ""
    schedule = layout.pp_schedule + stages if layout.pp > 1 else ""
    return variant_tag(spec, schedule, before_compile=("float8" if config.float8 else "", checkpoint))


def work_tag(config: LlamaConfig, sizes: dict[str, dict], tokens: tuple[tuple[str, str], ...]) -> str:
    """The shape values the case name leaves out, where they differ from the size's (the record's `work`)."""
    own = sizes[config.size]
    return "_".join(f"{token}{getattr(config, key)}" for key, token in tokens if getattr(config, key) != own[key])


def flops_per_token(config: LlamaConfig, causal: bool = False) -> int:
    """The PaLM count per token (torchtitan's), or with `causal` MaxText's (the attention term halved)."""
    total, embedding = parameter_counts(config)
    head_dim = config.hidden_size // config.num_heads
    count = flops.llm_flops_per_token_causal if causal else flops.llm_flops_per_token
    return count(total - embedding, config.num_layers, config.num_heads, head_dim, config.seq_length)


class LlamaWorkload(Workload):
    name = "llama"
    config_type = LlamaConfig
    title = "Llama 3 (--model llama)"
    builders = {"torch": "dlperf.workloads.llama.torch_step:build", "jax": "dlperf.workloads.llama.jax_step:build"}
    batch_key = "micro_batch_size"
    report_title = "Llama"
    flops_formula = "(6N + 12·L·H·Q·T) per token"
    plausible = PlausibleWork("a Llama-2-70B sequence", ("llama2_70b", "llama2-70b", "llama-2-70b"), 5e14)
    predictor = "dlperf.workloads.llama.predict:PREDICTOR"
    sizes: dict[str, dict] = SIZES

    def expand(self, values: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
        """The size fills every shape value the user did not give explicitly."""
        size = values.get("size", self.config_type.size)
        if size not in self.sizes:
            return values  # the check names it
        return {**values, **{k: v for k, v in self.sizes[size].items() if k not in explicit}}

    checked_layout = staticmethod(layout_of)  # the layout, refused in one line where it cannot run

    def validate(self, spec: RunSpec) -> None:
        config: LlamaConfig = spec.workload
        self.checked_layout(spec)
        if spec.device == "cpu" and config.float8:
            raise ConfigError(FLOAT8_NEEDS_GPU)
        if spec.data != "synthetic":
            open_token_file(spec.data, config.vocab_size, config.seq_length)

    work_tokens: tuple[tuple[str, str], ...] = WORK_TOKENS  # the shape values a case's name leaves out

    case_name = staticmethod(report_case)

    def layout_fields(self, config: LlamaConfig, layout: LlamaLayout) -> dict[str, Any]:
        """The record's report group and parallel layout."""
        return {"report_group": report_group(layout), "parallel": layout.as_record()}

    def plan(self, spec: RunSpec) -> WorkloadPlan:
        config: LlamaConfig = spec.workload
        layout = self.checked_layout(spec)
        case = self.case_name(config, layout)
        group = f"{case}_{llama_variant(spec, layout)}"
        work = work_tag(config, self.sizes, self.work_tokens)
        lr = config.lr if config.lr is not None else DEFAULT_LR
        fields = {"report_case": case, **self.layout_fields(config, layout), "work": work}
        return layout_plan(layout, group, f"{group}_{work}" if work else group, lr, fields)

    formulas = (flops.LLM_FLOPS_FORMULA, flops.LLM_FLOPS_FORMULA_CAUSAL)  # the words of its two FLOP counts

    def flops_per_token(self, config: LlamaConfig, causal: bool = False) -> int:
        return flops_per_token(config, causal)

    def derived_metrics(self, spec: RunSpec, plan: WorkloadPlan, throughput: float) -> dict[str, Any]:
        """Tokens/s and the PaLM formula's FLOPs, the MFU basis (no count: the formula is what the peers use)."""
        config: LlamaConfig = spec.workload
        per_token, causal = self.flops_per_token(config), self.flops_per_token(config, causal=True)
        tokens = plan.global_batch * config.seq_length
        tokens_per_s = throughput * config.seq_length
        return {
            "flops_per_token": per_token,
            "flops_per_iteration_formula": per_token * tokens,
            "flops_formula": self.formulas[0],
            "flops_per_token_causal": causal,
            "flops_per_iteration_causal": causal * tokens,
            "flops_formula_causal": self.formulas[1],
            "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_device": tokens_per_s / spec.world_size,
        }

    def total_parameters(self, config: LlamaConfig) -> int:
        return parameter_counts(config)[0]

    def footprint(self, spec: RunSpec, plan: WorkloadPlan) -> Footprint:
        """An estimate of one rank's peak, meant to sit a little above it: parameters split over tp, pp stages and
        the FSDP shards (dp_shard x cp), with their fp32 gradients, AdamW's two fp32 states and, under autocast, the
        16-bit copy of each weight it casts (`state_bytes`); the activations kept per block and micro-batch
        (`kept_bytes_per_token`), split by tp (sequence parallelism) and cp; and the logits' loss, the largest
        single term at Llama's 128K vocabulary (`LOGITS_BYTES`)."""
        config: LlamaConfig = spec.workload
        layout: LlamaLayout = plan.layout
        total = self.total_parameters(config)
        per_rank = total // (layout.tp * layout.pp * layout.dp_shard * layout.cp)
        tokens = config.seq_length * layout.micro_batch_size
        per_block = tokens * kept_bytes_per_token(config, spec.precision) / (layout.tp * layout.cp)
        blocks = -(-config.num_layers // layout.pp)
        in_flight = 1 if layout.pp == 1 else layout.pp
        logits = LOGITS_BYTES * tokens * config.vocab_size / layout.cp
        return Footprint(
            params_total=total,
            params_per_rank=per_rank,
            state_bytes=state_bytes(per_rank, "adamw", spec.precision),
            activation_bytes=int(in_flight * blocks * per_block + logits),
        )


# The loss over the logits, per element: the fp32 logits' log-softmax (kept for backward), then in backward the
# gradient of that output and the logits' own fp32 gradient beside it: 3 x 4 bytes at once. (Forward holds less:
# autocast's 16-bit logits, their fp32 copy and the log-softmax, 2 + 4 + 4.) Checked on the CPU against the peak of
# live tensors of a tiny Llama step whose memory is mostly its logits: the estimate is 14 % above it, as an
# estimate that counts every gradient beside the activations should be (tests/unit/test_llama_memory.py).
LOGITS_BYTES = 12


def kept_bytes_per_token(config: LlamaConfig, precision: str) -> float:
    """What one block keeps for backward per token. `selective`: the outputs of every matmul (q, k, v, the
    attention's output projection, SwiGLU's w1, w3 and w2), attention's output and its fp32 log-sum-exp per head,
    all in the compute precision, and the block's input (the fp32 residual stream, even under autocast); `full`:
    the block's input only; `none`: about 34 x hidden 16-bit values (Korthikanti et al. 2022 without the
    attention-score term, which fused attention does not keep)."""
    h, kv = config.hidden_size, config.num_kv_heads * (config.hidden_size // config.num_heads)
    compute = activation_bytes_per_element(precision)
    residual = 4 * h
    if config.activation_checkpoint == "full":
        return residual
    if config.activation_checkpoint == "selective":
        return compute * (4 * h + 2 * kv + 2 * config.ffn_hidden_size) + 4 * config.num_heads + residual
    return 34 * h * compute / 2
