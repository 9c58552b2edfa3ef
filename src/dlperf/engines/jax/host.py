"""The parent's side of the JAX engine: what it cannot run, refused in one line before any process starts, and
the installed versions for the record, from package metadata: the parent of a run never imports JAX."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from dlperf.errors import ConfigError
from dlperf.spec import RunSpec, flag

PACKAGES = ("jax", "jaxlib", "flax", "optax", "jax-cuda12-plugin", "jax-cuda13-plugin")
PRECISIONS = ("fp32", "amp-bf16")
JAX_PACKAGES = ("jax", "flax", "optax")  # what the JAX engine's steps import, checked before launch
INSTALL = "pip install 'dlperf[jax]' (and jax[cuda12] or jax[cuda13] on a GPU machine)"


def check_supported(spec: RunSpec) -> None:
    """One ConfigError line for what no JAX step runs: fp16, real data, torch.compile. (What one workload's JAX
    step lacks, its workload refuses; settings only PyTorch reads are refused from their fields' `engines`.)"""
    if spec.precision == "amp-fp16":
        raise ConfigError(
            "amp-fp16 is not available on the JAX engine (it needs a dynamic loss scale): "
            f"use {flag('precision')} amp-bf16 or fp32, or {flag('engine')} torch"
        )
    if spec.precision not in PRECISIONS:
        raise ConfigError(
            f"unknown precision {spec.precision!r} for the JAX engine: choose one of {', '.join(PRECISIONS)}"
        )
    if spec.data != "synthetic":
        raise ConfigError(
            f"the JAX engine reads synthetic data only: pass {flag('data')} synthetic, or {flag('engine')} torch"
        )
    if spec.compile:
        raise ConfigError(
            f"every JAX step is compiled by XLA already: drop {flag('compile')} with {flag('engine')} jax"
        )


def preflight(spec: RunSpec, local: bool) -> None:
    """What the JAX engine cannot run; where the ranks run here, whether JAX, Flax and optax are installed."""
    check_supported(spec)
    missing = [name for name in JAX_PACKAGES if importlib.util.find_spec(name) is None] if local else []
    if missing:
        raise ConfigError(f"--engine jax needs JAX, Flax and optax ({', '.join(missing)} not installed): {INSTALL}")


def versions() -> dict[str, Any]:
    """Installed JAX packages from their metadata."""
    facts: dict[str, Any] = {}
    for package in PACKAGES:
        try:
            facts[package.replace("-", "_")] = version(package)
        except PackageNotFoundError:
            if package in ("jax", "jaxlib", "flax", "optax"):
                facts[package] = None
    return facts
