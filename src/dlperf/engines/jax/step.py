"""The JAX engine's compiled training step: a workload's Recipe (its Flax module, loss, optimizer, data rows and
the plan's layout) becomes parameters and optimizer state sharded over a (dp, tp) mesh, a global batch, and one
iteration compiled ahead of time (compile_s). The workloads' own recipes are in workloads/<name>/jax_step.py."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import jax
import optax
from flax import linen as nn
from jax.sharding import PartitionSpec as P

from dlperf.engines.base import TrainStep
from dlperf.engines.jax import data, parallel, train


@dataclass(frozen=True)
class Recipe:
    """What a workload gives the compiler: the module and its sample input, loss, optimizer, data rows, and the
    plan's layout (global batch, dp x tp mesh, micro-batches accumulated per replica, how parameters split).

    A workload with other mesh axes names them in `axes` (outermost first, with sizes), how the batch
    (micro-batches, samples, *row) splits over them in `batch_spec`, and each parameter's split in `param_spec`."""

    module: nn.Module
    sample_input: jax.ShapeDtypeStruct
    loss_fn: train.LossFn
    tx: optax.GradientTransformation
    rows: tuple[data.Row, data.Row]  # inputs, labels
    global_batch: int
    dp: int
    tp: int = 1
    accumulation_steps: int = 1
    tp_plan: Mapping[tuple[str, str], P] = field(default_factory=dict)  # Flax (module, parameter) -> its split
    axes: tuple[tuple[str, int], ...] = ()
    batch_spec: P = P(None, "dp")
    param_spec: parallel.SpecOf | None = None
    state_collection: str = "batch_stats"  # the Flax collection that is the step's mutable state (TrainState.extra)
    finish: train.Finish | None = None  # that state's update after each optimizer step

    @property
    def mesh_axes(self) -> tuple[tuple[str, int], ...]:
        return self.axes or (("dp", self.dp), ("tp", self.tp))

    @property
    def spec_of(self) -> parallel.SpecOf:
        return self.param_spec or parallel.tp_plan_spec(self.tp_plan, self.tp)


class JaxStep:
    """A compiled iteration with its state and batch; `step()` dispatches one and returns the loss without
    waiting for it (XLA runs asynchronously), so the caller syncs only at window edges."""

    def __init__(self, recipe: Recipe, seed: int) -> None:
        mesh = parallel.build_mesh(recipe.mesh_axes)
        replicated = parallel.replicated(mesh)
        abstract = jax.eval_shape(recipe.module.init, jax.random.key(0), recipe.sample_input)
        shardings = {
            name: parallel.param_shardings(mesh, tree, recipe.spec_of)
            if name == "params"
            else jax.tree.map(lambda _: replicated, tree)
            for name, tree in abstract.items()
        }
        sample = jax.numpy.zeros(recipe.sample_input.shape, recipe.sample_input.dtype)
        variables = jax.jit(recipe.module.init, out_shardings=shardings)(jax.random.key(seed), sample)
        params = variables["params"]
        opt_shardings = optax.tree_map_params(
            recipe.tx,
            lambda _, sharding: sharding,
            jax.eval_shape(recipe.tx.init, params),
            shardings["params"],
            transform_non_params=lambda _: replicated,
        )
        opt_state = jax.jit(recipe.tx.init, out_shardings=opt_shardings)(params)
        self.state = train.TrainState(params, variables.get(recipe.state_collection, {}), opt_state)
        per_step = recipe.global_batch // recipe.accumulation_steps
        self.batch = tuple(
            data.global_batch(mesh, recipe.accumulation_steps, per_step, row, recipe.batch_spec) for row in recipe.rows
        )
        state_shardings = jax.tree.map(lambda leaf: leaf.sharding, self.state)
        jitted = jax.jit(
            train.make_train_step(recipe.loss_fn, recipe.tx, recipe.accumulation_steps, recipe.finish),
            out_shardings=(state_shardings, replicated),
            donate_argnums=0,
        )
        started = time.perf_counter()
        self._compiled = jitted.lower(self.state, self.batch).compile()
        self.compile_s = time.perf_counter() - started

    def step(self) -> jax.Array:
        self.state, loss = self._compiled(self.state, self.batch)
        return loss

    @staticmethod
    def read_loss(loss: jax.Array) -> float:
        """The global batch's mean loss (replicated on every process): waits for that step."""
        return parallel.first_value(loss)

    def train_step(self) -> TrainStep:
        """The engine interface's step; XLA's compile time is the record's compile_s (the first step only runs)."""
        return TrainStep(run=self.step, read_loss=self.read_loss, compile_s=self.compile_s)


def compile_step(recipe: Recipe, seed: int) -> TrainStep:
    """A workload's recipe compiled in the processes the engine's setup joined."""
    return JaxStep(recipe, seed).train_step()
