"""GPT pre-training on the JAX engine under the planned dp x tp layout: the Flax model of jax_model.py, AdamW as
torch_step.py sets it, random token windows drawn per sample, compiled by engines/jax/step.py."""

from __future__ import annotations

from dlperf.engines.base import TrainStep
from dlperf.engines.jax import train
from dlperf.engines.jax.engine import JaxEngine
from dlperf.engines.jax.step import Recipe, compile_step
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.gpt.config import ADAMW_BETAS, GPTConfig
from dlperf.workloads.gpt.jax_model import GPT, TP_PLAN
from dlperf.workloads.gpt.layout import Layout, padded_vocab
from dlperf.workloads.language_model.jax_parts import attention_for, next_token_recipe


def recipe(spec: RunSpec, plan: WorkloadPlan) -> Recipe:
    """The plan's layout (pipeline stages are refused before launch); the vocab padded to 128 x tp as in PyTorch."""
    config: GPTConfig = spec.workload
    layout: Layout = plan.layout
    dtype = train.compute_dtype(spec.precision)
    vocab = padded_vocab(config.vocab_size, layout.tp)
    module = GPT(config.num_layers, config.hidden_size, config.num_heads, config.seq_length, vocab, dtype,
                 attention_for(spec, dtype))  # fmt: skip
    return next_token_recipe(spec, plan, module, ADAMW_BETAS, tp_plan=TP_PLAN)


def build(spec: RunSpec, plan: WorkloadPlan, engine: JaxEngine) -> TrainStep:
    return compile_step(recipe(spec, plan), spec.seed)
