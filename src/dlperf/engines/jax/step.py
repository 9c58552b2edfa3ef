"""The JAX engine's training step for the rank worker: build_jax_step sets up processes, mesh, model, optimizer
and batch, compiles the whole iteration ahead of time (compile_s), and returns a JaxStep whose methods are what
the engine interface needs (step, loss, sync at window edges, peak memory, environment)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import jax
import optax
from flax import linen as nn
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from dlperf.engines.jax import data, parallel, train
from dlperf.engines.jax.gpt import GPT, attention_implementation, padded_vocab
from dlperf.engines.jax.resnet import ResNet50
from dlperf.engines.jax.support import GPT_DEFAULT_LR, check_supported, gpt_layout

MIB = 1024 * 1024


@dataclass(frozen=True)
class Recipe:
    """What a model gives the generic builder: the module and its sample input, loss, optimizer and layout."""

    module: nn.Module
    sample_input: jax.ShapeDtypeStruct
    loss_fn: train.LossFn
    tx: optax.GradientTransformation
    dp: int
    tp: int
    global_batch: int
    accumulation_steps: int
    rows: tuple[data.Row, data.Row]  # inputs, labels


def resnet_recipe(cfg: Mapping[str, Any], precision: str, world_size: int, seed: int) -> Recipe:
    """DP only; SGD with momentum, lr 0.1 x global batch / 256 unless given. Batch norm statistics are those
    of the global batch (jit over a sharded batch is SyncBN), where DDP normalises each device's batch."""
    batch, size = cfg["batch_size"], cfg["image_size"]
    global_batch = batch * world_size
    module = ResNet50(cfg["num_classes"], train.compute_dtype(precision))

    def loss_fn(params: Any, stats: Any, micro: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        images, labels = micro
        variables = {"params": params, "batch_stats": stats}
        logits, updates = module.apply(variables, images, train=True, mutable=["batch_stats"])
        return train.cross_entropy(logits, labels), updates["batch_stats"]

    lr = cfg.get("lr") or 0.1 * global_batch / 256
    return Recipe(
        module=module,
        sample_input=jax.ShapeDtypeStruct((1, size, size, 3), jax.numpy.float32),
        loss_fn=loss_fn,
        tx=train.sgd(lr, cfg["momentum"], cfg["weight_decay"]),
        dp=world_size,
        tp=1,
        global_batch=global_batch,
        accumulation_steps=1,
        rows=data.image_rows(seed, size, cfg["num_classes"]),
    )


def gpt_recipe(cfg: Mapping[str, Any], precision: str, world_size: int, seed: int) -> Recipe:
    """DP x TP; AdamW (0.9, 0.95), lr 1.5e-4 unless given; the vocab padded to 128 x tp as in PyTorch."""
    dp, tp, global_batch, steps = gpt_layout(cfg, world_size)
    dtype = train.compute_dtype(precision)
    head_dim = cfg["hidden_size"] // cfg["num_heads"]
    module = GPT(
        cfg["num_layers"],
        cfg["hidden_size"],
        cfg["num_heads"],
        cfg["seq_length"],
        padded_vocab(cfg["vocab_size"], tp),
        dtype,
        attention_implementation(jax.default_backend(), dtype, head_dim),
    )

    def loss_fn(params: Any, extra: Any, micro: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        inputs, labels = micro
        return train.cross_entropy(module.apply({"params": params}, inputs), labels), extra

    return Recipe(
        module=module,
        sample_input=jax.ShapeDtypeStruct((1, cfg["seq_length"]), jax.numpy.int32),
        loss_fn=loss_fn,
        tx=train.adamw(cfg.get("lr") or GPT_DEFAULT_LR, cfg["weight_decay"]),
        dp=dp,
        tp=tp,
        global_batch=global_batch,
        accumulation_steps=steps,
        rows=data.token_rows(seed, cfg["seq_length"], cfg["vocab_size"]),
    )


RECIPES = {"resnet50": resnet_recipe, "gpt": gpt_recipe}


class JaxStep:
    """A compiled iteration with its state and batch; `step()` dispatches one and returns the loss without
    waiting for it (XLA runs asynchronously), so the caller syncs only at window edges."""

    def __init__(self, recipe: Recipe, mesh: Mesh, seed: int) -> None:
        self.mesh = mesh
        self.global_batch = recipe.global_batch
        replicated = parallel.replicated(mesh)
        abstract = jax.eval_shape(recipe.module.init, jax.random.key(0), recipe.sample_input)
        shardings = {
            name: parallel.param_shardings(mesh, tree) if name == "params" else jax.tree.map(lambda _: replicated, tree)
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
        self.state = train.TrainState(params, variables.get("batch_stats", {}), opt_state)
        self.param_count = sum(leaf.size for leaf in jax.tree.leaves(params))
        per_step = recipe.global_batch // recipe.accumulation_steps
        self.batch = tuple(data.global_batch(mesh, recipe.accumulation_steps, per_step, row) for row in recipe.rows)
        state_shardings = jax.tree.map(lambda leaf: leaf.sharding, self.state)
        jitted = jax.jit(
            train.make_train_step(recipe.loss_fn, recipe.tx, recipe.accumulation_steps),
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

    @staticmethod
    def block(outputs: Any) -> None:
        """Wait until the device has finished computing `outputs` (window edges only)."""
        jax.block_until_ready(outputs)

    @staticmethod
    def barrier(name: str = "dlperf") -> None:
        """All processes meet here (a no-op with one process)."""
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices(name)

    @staticmethod
    def environment() -> dict[str, Any]:
        devices = jax.local_devices()
        return {
            "engine": "jax",
            **{name: version(name) for name in ("jax", "jaxlib", "flax", "optax")},
            "backend": jax.default_backend(),
            "device": devices[0].device_kind,
            "local_devices": len(devices),
            "devices": jax.device_count(),
            "processes": jax.process_count(),
        }


def build_jax_step(
    model: str,
    cfg: Mapping[str, Any],
    *,
    rank: int = 0,
    world_size: int = 1,
    local_rank: int = 0,
    coordinator: str | None = None,
    precision: str = "fp32",
    seed: int = 0,
    device: str = "auto",
) -> JaxStep:
    """Join the other processes (jax.distributed, one device each) and build this process's compiled step.

    `cfg` holds RunConfig's keys: resnet50 reads batch_size (per device), image_size, num_classes, lr, momentum,
    weight_decay; gpt reads num_layers, hidden_size, num_heads, seq_length, vocab_size (unpadded), dp, tp,
    micro_batch_size, global_batch_size, lr, weight_decay. `device` is auto, cpu or cuda.
    """
    check_supported(model, cfg, precision)
    parallel.initialize(coordinator, world_size, rank, local_rank, device)
    return prepare_step(model, cfg, world_size=world_size, precision=precision, seed=seed)


def prepare_step(model: str, cfg: Mapping[str, Any], *, world_size: int, precision: str, seed: int) -> JaxStep:
    """The compiled step in processes already joined (the engine's setup ran `parallel.initialize`)."""
    recipe = RECIPES[model](cfg, precision, world_size, seed)
    return JaxStep(recipe, parallel.build_mesh(recipe.dp, recipe.tp), seed)
