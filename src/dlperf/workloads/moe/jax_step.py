"""MoE pre-training on the JAX engine: the Flax model of jax_model.py over a (dp, fsdp, ep) mesh, expert parallelism
folded inside dp_shard as torch's step folds it (the ep ranks of one group neighbours; each holds num_experts / ep
experts, FSDP-sharded over the dp_shard / ep ranks holding the same experts; every other weight FSDP's over the
whole of dp_shard), AdamW and the token windows of Llama's recipe (language_model/jax_parts.py), compiled by
engines/jax/step.py. After each optimizer step the iteration's picks per expert, summed over every device, move
the expert bias (torchtitan's aux-loss-free balancing, the torch meter's rule) inside the compiled step.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from dlperf.engines.base import TrainStep
from dlperf.engines.jax import parallel, train
from dlperf.engines.jax.engine import JaxEngine
from dlperf.engines.jax.step import JaxStep, Recipe
from dlperf.errors import ConfigError
from dlperf.spec import RunSpec, flag
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.language_model.jax_parts import attention_implementation, next_token_recipe
from dlperf.workloads.llama.config import ADAMW_BETAS
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.moe.config import BIAS_UPDATE_RATE, MoEConfig
from dlperf.workloads.moe.jax_meter import RoutingMeter
from dlperf.workloads.moe.jax_model import EXPERT_AXIS, ROUTING_STATE, MoETransformer, param_spec, uses_bias

BATCH_AXES = ("dp", "fsdp", EXPERT_AXIS)


def mesh_axes(config: MoEConfig, layout: LlamaLayout) -> tuple[tuple[str, int], ...]:
    """(dp, fsdp, ep): dp_replicate, then dp_shard as dp_shard / ep groups of ep neighbours; refuses the splits
    the JAX MoE does not build in one line."""
    for dim in ("tp", "cp"):
        if getattr(layout, dim) > 1:
            raise ConfigError(f"{flag(dim)} with --model moe is not built on the JAX engine: drop it ({flag('ep')} "
                              "and FSDP are)")  # fmt: skip
    if layout.dp_shard % config.ep or config.num_experts % config.ep:
        raise ConfigError(
            f"{flag('ep')} {config.ep} must divide dp_shard {layout.dp_shard} and {flag('num_experts')} "
            f"{config.num_experts}"
        )
    return ("dp", layout.dp_replicate), ("fsdp", layout.dp_shard // config.ep), (EXPERT_AXIS, config.ep)


def move_bias(moved: bool, state: Any) -> Any:
    """Each MoE block's expert bias moved by the sign of its iteration's counts against their mean, centred
    (torchtitan: bias += rate x sign(mean - count)), where the router uses one; the iteration's counts zeroed."""
    if "step_counts" not in state:
        return {name: move_bias(moved, inner) for name, inner in state.items()}
    counts = state["step_counts"].astype(jnp.float32)
    delta = BIAS_UPDATE_RATE * jnp.sign(counts.mean() - counts)
    bias = state["expert_bias"] + (delta - delta.mean() if moved else 0.0)
    return {**state, "expert_bias": bias, "step_counts": jnp.zeros_like(state["step_counts"])}


def recipe(spec: RunSpec, plan: WorkloadPlan) -> Recipe:
    config: MoEConfig = spec.workload
    layout: LlamaLayout = plan.layout
    axes = mesh_axes(config, layout)
    dtype = train.compute_dtype(spec.precision)
    head = config.head_dim if config.attention == "gqa" else config.qk_nope_head_dim + config.qk_rope_head_dim
    attention = attention_implementation(jax.default_backend(), dtype, head)
    module = MoETransformer(config, dtype, attention, mesh=parallel.build_mesh(axes), batch_axes=BATCH_AXES)

    def loss_fn(params: Any, extra: Any, micro: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        inputs, labels = micro
        logits, state = module.apply({"params": params, ROUTING_STATE: extra}, inputs, mutable=[ROUTING_STATE])
        return train.cross_entropy(logits, labels), state[ROUTING_STATE]

    split = next_token_recipe(spec, plan, module, ADAMW_BETAS, axes=axes, batch_spec=P(None, BATCH_AXES),
                              param_spec=partial(param_spec, layout.dp_shard, config.ep))  # fmt: skip
    return replace(
        split,
        sample_input=jax.ShapeDtypeStruct((layout.dp, config.seq_length), jnp.int32),  # a row per shard_map block
        loss_fn=loss_fn,
        state_collection=ROUTING_STATE,
        finish=partial(move_bias, uses_bias(config)),
    )


def build(spec: RunSpec, plan: WorkloadPlan, engine: JaxEngine) -> TrainStep:
    """The compiled step with the routing meter: its loss reader closes the meter's windows, the meter is the
    step's window probe and writes `moe` into the step's facts (the torch step's fields)."""
    step = JaxStep(recipe(spec, plan), spec.seed)
    model: dict[str, Any] = {}
    meter = RoutingMeter(spec.workload, lambda: step.state.extra, model)
    compiled = step.train_step()
    return replace(compiled, read_loss=meter.wrap(compiled.read_loss), model=model, probes=(meter,))
