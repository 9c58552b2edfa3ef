"""GPT pre-training on the JAX engine under the planned dp x tp layout: the Flax model of jax_model.py, AdamW as
torch_step.py sets it, random token windows drawn per sample, compiled by engines/jax/step.py."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from dlperf.engines.base import TrainStep
from dlperf.engines.jax import train
from dlperf.engines.jax.data import Row
from dlperf.engines.jax.engine import JaxEngine
from dlperf.engines.jax.step import Recipe, compile_step
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.gpt.config import ADAMW_BETAS, GPTConfig
from dlperf.workloads.gpt.jax_model import GPT, TP_PLAN, attention_implementation
from dlperf.workloads.gpt.layout import Layout, padded_vocab


def token_rows(seed: int, seq_length: int, vocab_size: int) -> tuple[Row, Row]:
    """Inputs and next-token labels of one random window of seq+1 ids below the unpadded vocab size."""
    window = lambda i: np.random.default_rng((seed, i)).integers(0, vocab_size, seq_length + 1).astype(np.int32)  # noqa: E731
    return (lambda i: window(i)[:-1]), (lambda i: window(i)[1:])


def recipe(spec: RunSpec, plan: WorkloadPlan) -> Recipe:
    """The plan's layout (pipeline stages are refused before launch); the vocab padded to 128 x tp as in PyTorch."""
    config: GPTConfig = spec.workload
    layout: Layout = plan.layout
    dtype = train.compute_dtype(spec.precision)
    module = GPT(
        config.num_layers,
        config.hidden_size,
        config.num_heads,
        config.seq_length,
        padded_vocab(config.vocab_size, layout.tp),
        dtype,
        attention_implementation(jax.default_backend(), dtype, config.hidden_size // config.num_heads),
    )

    def loss_fn(params: Any, extra: Any, micro: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        inputs, labels = micro
        return train.cross_entropy(module.apply({"params": params}, inputs), labels), extra

    return Recipe(
        module=module,
        sample_input=jax.ShapeDtypeStruct((1, config.seq_length), jax.numpy.int32),
        loss_fn=loss_fn,
        tx=train.adamw(plan.lr, ADAMW_BETAS, config.weight_decay),
        rows=token_rows(spec.seed, config.seq_length, config.vocab_size),
        global_batch=layout.global_batch_size,
        dp=layout.dp,
        tp=layout.tp,
        accumulation_steps=layout.accumulation_steps,
        tp_plan=TP_PLAN,
    )


def build(spec: RunSpec, plan: WorkloadPlan, engine: JaxEngine) -> TrainStep:
    return compile_step(recipe(spec, plan), spec.seed)
