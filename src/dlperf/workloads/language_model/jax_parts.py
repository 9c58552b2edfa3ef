"""What the JAX steps of the language models share: random token windows drawn per sample, the attention kernel
picked per backend, and the next-token recipe (cross-entropy, AdamW, the layout's batch) around a model's module."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dlperf.engines.jax import train
from dlperf.engines.jax.data import Row
from dlperf.engines.jax.step import Recipe
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan


def token_rows(seed: int, seq_length: int, vocab_size: int) -> tuple[Row, Row]:
    """Inputs and next-token labels of one random window of seq+1 ids below the unpadded vocab size."""
    window = lambda i: np.random.default_rng((seed, i)).integers(0, vocab_size, seq_length + 1).astype(np.int32)  # noqa: E731
    return (lambda i: window(i)[:-1]), (lambda i: window(i)[1:])


def attention_implementation(backend: str, dtype: Any, head_dim: int) -> str | None:
    """cuDNN's fused flash attention where it applies (GPU, 16-bit, head dim a multiple of 8 up to 128), as
    PyTorch's SDPA picks its flash kernel there; XLA's own attention elsewhere (None)."""
    if backend == "gpu" and dtype != jnp.float32 and head_dim % 8 == 0 and head_dim <= 128:
        return "cudnn"
    return None


def attention_for(spec: RunSpec, dtype: Any) -> str | None:
    """The attention kernel for this run's model (its hidden size over its heads) on this process's backend."""
    config = spec.workload
    return attention_implementation(jax.default_backend(), dtype, config.hidden_size // config.num_heads)


def next_token_recipe(
    spec: RunSpec, plan: WorkloadPlan, module: Any, betas: tuple[float, float], **split: Any
) -> Recipe:
    """`module`'s recipe: cross-entropy on the next token, AdamW at the plan's rate with `betas` and the config's
    weight decay, random windows of the config's length, the layout's batch and micro-batches; `split` holds the
    Recipe's fields of how the model splits (tp_plan, or axes, batch_spec and param_spec)."""
    config = spec.workload
    layout = plan.layout

    def loss_fn(params: Any, extra: Any, micro: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        inputs, labels = micro
        return train.cross_entropy(module.apply({"params": params}, inputs), labels), extra

    return Recipe(
        module=module,
        sample_input=jax.ShapeDtypeStruct((1, config.seq_length), jnp.int32),
        loss_fn=loss_fn,
        tx=train.adamw(plan.lr, betas, config.weight_decay),
        rows=token_rows(spec.seed, config.seq_length, config.vocab_size),
        global_batch=layout.global_batch_size,
        dp=layout.dp,
        tp=layout.tp,
        accumulation_steps=layout.accumulation_steps,
        **split,
    )
