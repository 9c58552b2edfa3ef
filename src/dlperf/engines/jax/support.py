"""What the JAX engine can run, checked before any process starts and without importing JAX."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlperf.errors import ConfigError

MODELS = ("resnet50", "gpt")
PRECISIONS = ("fp32", "amp-bf16")
GPT_DEFAULT_LR = 1.5e-4  # the torch GPT workload's default (Megatron's GPT-2 345M recipe)


def check_supported(model: str, cfg: Mapping[str, Any], precision: str) -> None:
    """One ConfigError line for what the JAX engine refuses: other models, fp16, pipeline stages, real data."""
    if model not in MODELS:
        raise ConfigError(f"the JAX engine has no model {model!r}: choose one of {', '.join(MODELS)}")
    if precision == "amp-fp16":
        raise ConfigError(
            "amp-fp16 is not available on the JAX engine (it needs a dynamic loss scale): "
            "use --precision amp-bf16 or fp32, or --engine torch"
        )
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {precision!r} for the JAX engine: choose one of {', '.join(PRECISIONS)}")
    if cfg.get("data", "synthetic") != "synthetic":
        raise ConfigError("the JAX engine reads synthetic data only: pass --data synthetic, or --engine torch")
    if model == "gpt" and cfg.get("pp", 1) != 1:
        raise ConfigError(
            f"the JAX engine has no pipeline parallelism (--pp {cfg['pp']}): use --pp 1 or --engine torch"
        )


def gpt_layout(cfg: Mapping[str, Any], world_size: int) -> tuple[int, int, int, int]:
    """(dp, tp, global batch, accumulation steps) of a GPT run, as the torch workload resolves them."""
    tp = cfg.get("tp", 1)
    dp = cfg.get("dp") or world_size // tp
    if dp * tp != world_size:
        raise ConfigError(f"dp x tp = {dp} x {tp} does not equal the {world_size} processes of this JAX run")
    if cfg["num_heads"] % tp:
        raise ConfigError(f"--num-heads {cfg['num_heads']} is not divisible by --tp {tp}")
    micro = cfg["micro_batch_size"]
    global_batch = cfg.get("global_batch_size") or micro * dp
    if global_batch % (micro * dp):
        raise ConfigError(f"--global-batch-size {global_batch} is not divisible by micro batch x dp = {micro * dp}")
    return dp, tp, global_batch, global_batch // (micro * dp)
