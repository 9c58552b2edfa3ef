"""The parent's side of the JAX engine: what it cannot run, refused in one line before any process starts, and
the installed versions for the record, from package metadata: the parent of a run never imports JAX."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from dlperf.errors import ConfigError
from dlperf.install import extra as install
from dlperf.spec import RunSpec, flag

PACKAGES = ("jax", "jaxlib", "flax", "optax", "jax-cuda12-plugin", "jax-cuda13-plugin")
PRECISIONS = ("fp32", "amp-bf16")
JAX_PACKAGES = ("jax", "flax", "optax")  # what the JAX engine's steps import, checked before launch
CUDA_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin")  # JAX's GPU backend, a package of its own since 0.4.26
INSTALL = f"{install('jax')} (and jax[cuda12] or jax[cuda13] on a GPU machine)"


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


def has_cuda_plugin() -> bool:
    """JAX can reach a GPU: its CUDA plugin is installed, or a jaxlib built with CUDA inside (before 0.4.26)."""
    if any(importlib.util.find_spec(name) for name in CUDA_PLUGINS):
        return True
    try:
        return "cuda" in version("jaxlib")
    except PackageNotFoundError:
        return False


def preflight(spec: RunSpec, local: bool) -> None:
    """What the JAX engine cannot run; where the ranks run here, whether JAX, Flax and optax are installed, and for
    a GPU run JAX's CUDA plugin (without it every rank would fail inside, or `jax` quietly runs on the CPU)."""
    check_supported(spec)
    if not local:
        return
    missing = [name for name in JAX_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(f"--engine jax needs JAX, Flax and optax ({', '.join(missing)} not installed): {INSTALL}")
    if spec.device == "cuda" and not has_cuda_plugin():
        raise ConfigError(
            f"{flag('device')} cuda with {flag('engine')} jax needs JAX's CUDA plugin ({' or '.join(CUDA_PLUGINS)} "
            "not installed): pip install 'jax[cuda12]' (or jax[cuda13], to match the driver), or run "
            f"{flag('device')} cpu"
        )


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
