"""One training iteration as a pure function of (state, batch), for XLA to compile whole: forward, backward,
gradient accumulation over micro-batches, and the optax update, each the same algorithm as the torch workload's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

COMPUTE_DTYPES = {"fp32": jnp.float32, "amp-bf16": jnp.bfloat16}


class TrainState(NamedTuple):
    params: Any
    extra: Any  # mutable model state outside the parameters: ResNet's batch statistics, {} for the GPT
    opt_state: Any


# (params, extra, micro-batch) -> (mean loss, new extra)
LossFn = Callable[[Any, Any, Any], tuple[jax.Array, Any]]
TrainStepFn = Callable[[TrainState, Any], tuple[TrainState, jax.Array]]
Finish = Callable[[Any], Any]  # extra -> extra, once per iteration after the optimizer step


def compute_dtype(precision: str) -> Any:
    """The dtype matmuls and convolutions run in; parameters, optimizer state and the loss stay fp32."""
    return COMPUTE_DTYPES[precision]


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean cross entropy, computed in fp32 whatever the logits' dtype (as the torch workloads do)."""
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


def sgd(lr: float, momentum: float, weight_decay: float) -> optax.GradientTransformation:
    """torch.optim.SGD: weight decay added to the gradient, then heavy-ball momentum (no dampening)."""
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(lr, momentum=momentum))


def adamw(lr: float, betas: tuple[float, float], weight_decay: float) -> optax.GradientTransformation:
    """torch.optim.AdamW: eps 1e-8, decoupled decay on every parameter."""
    return optax.adamw(lr, b1=betas[0], b2=betas[1], eps=1e-8, weight_decay=weight_decay)


def make_train_step(
    loss_fn: LossFn, tx: optax.GradientTransformation, accumulation_steps: int, finish: Finish | None = None
) -> TrainStepFn:
    """The iteration over a batch whose leading axis holds `accumulation_steps` micro-batches: gradients are
    averaged over them (a lax.scan, so one micro-batch's activations live at a time), then one optimizer step, then
    `finish` on the model's state (the MoE routers' bias moved by the step's counts, as torch's after-step hook)."""
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def train_step(state: TrainState, batch: Any) -> tuple[TrainState, jax.Array]:
        if accumulation_steps == 1:
            (loss, extra), grads = grad_fn(state.params, state.extra, jax.tree.map(lambda b: b[0], batch))
        else:

            def micro(carry: tuple, micro_batch: Any) -> tuple[tuple, None]:
                extra, grad_sum, loss_sum = carry
                (loss, extra), grads = grad_fn(state.params, extra, micro_batch)
                return (extra, jax.tree.map(jnp.add, grad_sum, grads), loss_sum + loss), None

            zeros = jax.tree.map(jnp.zeros_like, state.params)
            (extra, grads, loss), _ = jax.lax.scan(micro, (state.extra, zeros, jnp.zeros((), jnp.float32)), batch)
            grads = jax.tree.map(lambda g: g / accumulation_steps, grads)
            loss = loss / accumulation_steps
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        if finish is not None:
            extra = finish(extra)
        return TrainState(optax.apply_updates(state.params, updates), extra, opt_state), loss

    return train_step
