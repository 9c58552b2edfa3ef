"""ResNet-50 on the JAX engine: the Flax model of jax_model.py, SGD with momentum as torch_step.py sets it,
synthetic images drawn per sample, compiled by engines/jax/step.py. Data parallel only; batch norm statistics are
those of the global batch (jit over a sharded batch is SyncBN), where DDP normalises each device's batch."""

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
from dlperf.workloads.resnet import ResNetConfig
from dlperf.workloads.resnet.jax_model import ResNet50


def image_rows(seed: int, image_size: int, num_classes: int) -> tuple[Row, Row]:
    """NHWC images from N(0, 1) and uniform labels, as the torch workload's synthetic mode draws them."""
    images = lambda i: np.random.default_rng((seed, i, 0)).standard_normal((image_size, image_size, 3), np.float32)  # noqa: E731
    labels = lambda i: np.asarray(np.random.default_rng((seed, i, 1)).integers(num_classes), np.int32)  # noqa: E731
    return images, labels


def recipe(spec: RunSpec, plan: WorkloadPlan) -> Recipe:
    config: ResNetConfig = spec.workload
    size = config.image_size
    module = ResNet50(config.num_classes, train.compute_dtype(spec.precision))

    def loss_fn(params: Any, stats: Any, micro: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        images, labels = micro
        variables = {"params": params, "batch_stats": stats}
        logits, updates = module.apply(variables, images, train=True, mutable=["batch_stats"])
        return train.cross_entropy(logits, labels), updates["batch_stats"]

    return Recipe(
        module=module,
        sample_input=jax.ShapeDtypeStruct((1, size, size, 3), jax.numpy.float32),
        loss_fn=loss_fn,
        tx=train.sgd(plan.lr, config.momentum, config.weight_decay),
        rows=image_rows(spec.seed, size, config.num_classes),
        global_batch=plan.global_batch,
        dp=spec.world_size,
    )


def build(spec: RunSpec, plan: WorkloadPlan, engine: JaxEngine) -> TrainStep:
    return compile_step(recipe(spec, plan), spec.seed)
