"""ResNet-50 v1.5 in Flax: torchvision's resnet50 layer for layer (stride on the 3x3, batch norm, no conv bias,
the same initialisation), in NHWC, so the two engines train the same network with the same parameter count."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride of the first block)
EXPANSION = 4

# torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu") on every conv
conv_init = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def _torch_linear_bias(fan_in: int) -> Callable[..., jax.Array]:
    """nn.Linear's default bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


def batch_norm(train: bool, dtype: Any, name: str | None = None) -> nn.BatchNorm:
    """torch's BatchNorm2d: running statistics at momentum 0.1 (Flax's 0.9), eps 1e-5, the two-pass variance."""
    return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5, use_fast_variance=False,
                        dtype=dtype, name=name)  # fmt: skip


class Bottleneck(nn.Module):
    width: int
    stride: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        conv = lambda features, size, stride, pad, name: nn.Conv(  # noqa: E731
            features, (size, size), (stride, stride), ((pad, pad), (pad, pad)), use_bias=False,
            kernel_init=conv_init, dtype=self.dtype, name=name,
        )  # fmt: skip
        norm = lambda name: batch_norm(train, self.dtype, name)  # noqa: E731
        out = nn.relu(norm("bn1")(conv(self.width, 1, 1, 0, "conv1")(x)))
        out = nn.relu(norm("bn2")(conv(self.width, 3, self.stride, 1, "conv2")(out)))
        out = norm("bn3")(conv(self.width * EXPANSION, 1, 1, 0, "conv3")(out))
        if self.stride != 1 or x.shape[-1] != self.width * EXPANSION:
            x = norm("downsample_bn")(conv(self.width * EXPANSION, 1, self.stride, 0, "downsample_conv")(x))
        return nn.relu(out + x)


class ResNet50(nn.Module):
    """Images NHWC -> logits (in `dtype`; the loss casts them to fp32)."""

    num_classes: int = 1000
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        x = nn.Conv(64, (7, 7), (2, 2), ((3, 3), (3, 3)), use_bias=False, kernel_init=conv_init, dtype=self.dtype)(
            x.astype(self.dtype)
        )
        x = nn.relu(batch_norm(train, self.dtype)(x))
        x = nn.max_pool(x, (3, 3), (2, 2), ((1, 1), (1, 1)))
        for width, blocks, stride in STAGES:
            for i in range(blocks):
                x = Bottleneck(width, stride if i == 0 else 1, self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        fan_in = x.shape[-1]
        return nn.Dense(
            self.num_classes,
            dtype=self.dtype,
            kernel_init=nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform"),  # kaiming_uniform(a=sqrt(5))
            bias_init=_torch_linear_bias(fan_in),
        )(x)
