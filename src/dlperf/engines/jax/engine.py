"""The JAX engine: one process of a jax.distributed job, timed by the same loop as the PyTorch engine.

Preflight and versions need no JAX (support.py, package metadata), so the parent of a run never imports it; the
rank imports JAX in `setup`. JAX dispatches asynchronously: a step returns as soon as it is queued, so the
clock's marks are enqueue times and per-step latency on JAX is each window's mean (see JaxStepClock).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import time
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from dlperf.engines.base import Engine, RankEnv, StepClock
from dlperf.engines.jax.support import check_supported
from dlperf.errors import ConfigError
from dlperf.spec import RunSpec

PACKAGES = ("jax", "jaxlib", "flax", "optax", "jax-cuda12-plugin", "jax-cuda13-plugin")
# workload settings only the PyTorch steps read, with their defaults (JAX lays images out NHWC already)
TORCH_ONLY = {"channels_last": False, "optimizer_impl": "auto", "data_loader": "torchvision", "dp_mode": "ddp"}
CUDA_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin")
JAX_PACKAGES = ("jax", "flax", "optax")  # what the JAX engine's steps import, checked before launch
INSTALL = "pip install 'dlperf[jax]' (and jax[cuda12] or jax[cuda13] on a GPU machine)"


def spec_config(spec: RunSpec) -> dict[str, Any]:
    """The workload's settings and the data source as the plain mapping build_jax_step reads."""
    return {**asdict(spec.workload), "data": spec.data}


def coordinator_address(rank: RankEnv) -> str | None:
    """jax.distributed's coordinator next to the launcher's rendezvous: MASTER_ADDR, port MASTER_PORT + 1
    (torchrun's store holds MASTER_PORT itself); None for one process."""
    if not rank.distributed:
        return None
    if not rank.master_addr or rank.master_port is None:
        raise ConfigError("a multi-process JAX run needs MASTER_ADDR and MASTER_PORT: start it with dlperf's launchers")
    return f"{rank.master_addr}:{rank.master_port + 1}"


def device_kind(choice: str) -> str:
    """`auto` takes CUDA where JAX's CUDA plugin is installed and an NVIDIA driver is loaded: decided before JAX
    starts a backend (jax.distributed must come first), and each process then owns one GPU, as torch's ranks do."""
    if choice != "auto":
        return choice
    plugin = any(importlib.util.find_spec(name) for name in CUDA_PLUGINS)
    return "cuda" if plugin and os.path.exists("/dev/nvidiactl") else "cpu"


class JaxStepClock(StepClock):
    """Per-step latency as each window's mean: with asynchronous dispatch the host sees when a step was queued,
    not when it ran, and a device-side timer per step would need a sync per step. `collect` runs after the
    loop has blocked on the window's last output, so (now - window start) / steps is the true mean."""

    def __init__(self) -> None:
        self._opened = time.perf_counter()
        self._steps = 0

    def start(self) -> None:
        self._opened, self._steps = time.perf_counter(), 0

    def mark(self) -> None:
        self._steps += 1

    def collect(self) -> list[float]:
        now = time.perf_counter()
        mean_ms = (now - self._opened) * 1000.0 / self._steps if self._steps else 0.0
        durations = [mean_ms] * self._steps
        self._opened, self._steps = now, 0
        return durations


class JaxEngine(Engine):
    name = "jax"

    def __init__(self) -> None:
        self.rank = RankEnv(0, 1, 0, 1)

    def preflight(self, spec: RunSpec, local: bool) -> None:
        """What the JAX engine cannot run, in one line, before any process starts (no JAX import)."""
        check_supported(spec.model, spec_config(spec), spec.precision)
        if spec.compile:
            raise ConfigError("every JAX step is compiled by XLA already: drop --compile with --engine jax")
        for key, default in TORCH_ONLY.items():
            value = getattr(spec.workload, key, default)
            if value != default:
                flag = "--" + key.replace("_", "-")
                raise ConfigError(
                    f"{flag} {value} is a PyTorch setting: drop it with --engine jax, or use --engine torch"
                )
        missing = [name for name in JAX_PACKAGES if importlib.util.find_spec(name) is None] if local else []
        if missing:
            raise ConfigError(f"--engine jax needs JAX, Flax and optax ({', '.join(missing)} not installed): {INSTALL}")

    def setup(self, spec: RunSpec, rank: RankEnv) -> None:
        from dlperf.engines.jax import parallel

        self.rank = rank
        device = device_kind(spec.device)
        parallel.initialize(coordinator_address(rank), rank.world_size, rank.rank, rank.local_rank, device)

    @property
    def device_type(self) -> str:
        import jax

        return "cuda" if jax.default_backend() == "gpu" else jax.default_backend()

    def device_name(self) -> str:
        import jax

        return jax.local_devices()[0].device_kind

    def sync(self, outputs: Any = None) -> None:
        import jax

        if outputs is None:
            jax.effects_barrier()
        else:
            jax.block_until_ready(outputs)

    def barrier(self) -> None:
        from dlperf.engines.jax.step import JaxStep

        JaxStep.barrier()

    def clock(self) -> StepClock:
        return JaxStepClock()

    def gather(self, value: Any) -> list[Any]:
        """Every process's `value` through JAX's own collective (process_allgather over the global devices):
        pickled to bytes, padded to the longest, gathered, unpickled; the ranks are one job, as in torch's
        all_gather_object."""
        if not self.rank.distributed:
            return [value]
        import numpy as np
        from jax.experimental import multihost_utils

        payload = np.frombuffer(pickle.dumps(value), dtype=np.uint8)
        sizes = np.asarray(multihost_utils.process_allgather(np.asarray([payload.size], np.int64))).reshape(-1)
        padded = np.zeros(int(sizes.max()), np.uint8)
        padded[: payload.size] = payload
        rows = np.asarray(multihost_utils.process_allgather(padded))
        return [pickle.loads(rows[i, : int(n)].tobytes()) for i, n in enumerate(sizes)]

    def reset_peak_memory(self) -> None:
        """Nothing to reset: JAX's allocator peak and the process's RSS peak both count from the start, which
        holds only set-up before the step is built."""

    def peak_memory_mib(self) -> dict[str, float]:
        from dlperf.engines.jax.step import JaxStep

        return JaxStep.peak_memory_mib()

    def shutdown(self) -> None:
        if self.rank.distributed:
            import jax

            jax.distributed.shutdown()

    @staticmethod
    def versions() -> dict[str, Any]:
        """Installed JAX packages from their metadata (JAX itself is not imported in the parent)."""
        facts: dict[str, Any] = {}
        for package in PACKAGES:
            try:
                facts[package.replace("-", "_")] = version(package)
            except PackageNotFoundError:
                if package in ("jax", "jaxlib", "flax", "optax"):
                    facts[package] = None
        return facts
