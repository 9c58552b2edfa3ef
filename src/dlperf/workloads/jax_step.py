"""Both workloads' step on the JAX engine: the Flax model, optax optimizer and sharded batch of
engines/jax/step.py, compiled ahead of time in the processes the engine's setup joined."""

from __future__ import annotations

from dlperf.engines.base import TrainStep
from dlperf.engines.jax.engine import JaxEngine, spec_config
from dlperf.engines.jax.step import prepare_step
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan


def build(spec: RunSpec, plan: WorkloadPlan, engine: JaxEngine) -> TrainStep:
    """The compiled step; its XLA compile time is the record's compile_s (the first step only runs it)."""
    step = prepare_step(
        spec.model, spec_config(spec), world_size=engine.rank.world_size, precision=spec.precision, seed=spec.seed
    )
    if step.global_batch != plan.global_batch:
        raise AssertionError(f"JAX global batch {step.global_batch} differs from the plan's {plan.global_batch}")
    return TrainStep(run=step.step, read_loss=step.read_loss, compile_s=step.compile_s)
