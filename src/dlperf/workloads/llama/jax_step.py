"""Llama pre-training on the JAX engine under the planned layout: the Flax model of jax_model.py over a
(dp, fsdp, cp, tp) mesh (dp_replicate, dp_shard, cp and tp of the plan), AdamW as torch_step.py sets it, random token
windows drawn per sample (language_model/jax_parts.py), compiled by engines/jax/step.py. The batch splits over
dp x fsdp and its sequence over cp; XLA's partitioner derives every collective, attention over the split sequence
included."""

from __future__ import annotations

from functools import partial

from jax.sharding import PartitionSpec as P

from dlperf.engines.base import TrainStep
from dlperf.engines.jax import train
from dlperf.engines.jax.engine import JaxEngine
from dlperf.engines.jax.step import Recipe, compile_step
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.language_model.jax_parts import attention_for, next_token_recipe
from dlperf.workloads.llama.config import ADAMW_BETAS, LlamaConfig
from dlperf.workloads.llama.jax_model import Llama, param_spec
from dlperf.workloads.llama.layout import LlamaLayout


def recipe(spec: RunSpec, plan: WorkloadPlan) -> Recipe:
    config: LlamaConfig = spec.workload
    layout: LlamaLayout = plan.layout
    dtype = train.compute_dtype(spec.precision)
    module = Llama(config, dtype, attention_for(spec, dtype))
    axes = (("dp", layout.dp_replicate), ("fsdp", layout.dp_shard), ("cp", layout.cp), ("tp", layout.tp))
    return next_token_recipe(spec, plan, module, ADAMW_BETAS, axes=axes, batch_spec=P(None, ("dp", "fsdp"), "cp"),
                             param_spec=partial(param_spec, layout.dp_shard * layout.cp, layout.tp))  # fmt: skip


def build(spec: RunSpec, plan: WorkloadPlan, engine: JaxEngine) -> TrainStep:
    return compile_step(recipe(spec, plan), spec.seed)
