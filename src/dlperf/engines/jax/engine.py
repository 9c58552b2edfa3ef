"""The JAX engine: one process of a jax.distributed job, timed by the same loop as the PyTorch engine.

The parent's side (checks, versions) is host.py and needs no JAX; the rank imports JAX in `setup`. JAX dispatches
asynchronously: a step returns as soon as it is queued, so the clock's marks are enqueue times and per-step latency
on JAX is each window's mean (see JaxStepClock).
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
import time
from typing import Any

from dlperf.engines.base import Engine, RankEnv, StepClock, cpu_threads, pin_cpu_share
from dlperf.engines.jax.host import has_cuda_plugin
from dlperf.errors import ConfigError
from dlperf.spec import MEMORY_CAP_ENV, RunSpec

MIB = 1024 * 1024
UNCAPPED_FRACTION = "0.95"  # of the device for XLA's allocator when dlperf sets no cap: 4 GB of an H100 for the rest


def allocator_env(environ: dict[str, str], world_size: int, device: str, cap_fraction: str | None) -> dict[str, str]:
    """XLA's GPU allocator settings for one rank, read when JAX creates its GPU client (so set before that).

    JAX preallocates 75 % of every GPU it sees by default (docs.jax.dev, "GPU memory allocation"), which starves
    anything else on the device: a torch run beside it (benchmarks/engines.py) or this rank's NCCL and cuDNN
    workspaces. dlperf turns preallocation off unless the user set it; a maxbatch cap (`cap_fraction` of the
    device) becomes a preallocated pool of that size (both the current and the deprecated variable name). A
    one-process run sees only the first visible GPU, as a torch run uses one (without it JAX opens a context on
    every visible GPU); several processes each take their local rank's through jax.distributed.

    Without preallocation the fraction still caps XLA's allocator (75 % by default), where torch's allocator may
    take the whole device: the 1.3B GPT at micro-batch 8 ran on torch (60 GB reserved) and ran out of memory on
    JAX asking for 40 GiB of temporaries on an H100. So the cap is raised to `UNCAPPED_FRACTION`, the room left
    for cuDNN's and NCCL's workspaces, unless the user set a fraction."""
    env: dict[str, str] = {}
    if device != "cuda":
        return env
    if cap_fraction:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
        env["XLA_CLIENT_MEM_FRACTION"] = env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = cap_fraction
    else:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        fraction = environ.get("XLA_CLIENT_MEM_FRACTION") or environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
        env["XLA_CLIENT_MEM_FRACTION"] = env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction or UNCAPPED_FRACTION
    if world_size == 1:
        listed = [item.strip() for item in environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")]
        env["CUDA_VISIBLE_DEVICES"] = listed[0]
    return env


def memory_fraction(cap_bytes: int, total_bytes: int) -> str:
    return f"{min(1.0, cap_bytes / total_bytes):.4f}"


def memory_keys(stats: dict[str, Any] | None) -> dict[str, float] | None:
    """XLA's allocator statistics under the keys torch's engine uses, so reports and maxbatch read both:
    `allocated` the peak of live buffers, `reserved` what the allocator's pool held at most (its limit when it
    reports no pool: a preallocated pool is all held)."""
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    reserved = stats.get("peak_pool_bytes") or stats.get("pool_bytes") or stats.get("bytes_limit", 0)
    return {"allocated": stats["peak_bytes_in_use"] / MIB, "reserved": reserved / MIB}


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
    return "cuda" if has_cuda_plugin() and os.path.exists("/dev/nvidiactl") else "cpu"


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


def _gpu_total_bytes(local_rank: int) -> int:
    """This rank's GPU's memory from NVML: the fraction must be set before JAX starts a backend, so JAX cannot
    be asked."""
    import pynvml

    from dlperf.machine.gpus import nvml_handles, visible_gpu_ids

    pynvml.nvmlInit()
    try:
        handle = nvml_handles(pynvml, visible_gpu_ids(local_rank + 1))[local_rank]
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    finally:
        pynvml.nvmlShutdown()


class JaxEngine(Engine):
    name = "jax"

    def __init__(self) -> None:
        self.rank = RankEnv(0, 1, 0, 1)

    def setup(self, spec: RunSpec, rank: RankEnv) -> None:
        from dlperf.engines.jax import parallel

        self.rank = rank
        device = device_kind(spec.device)
        cap = int(os.environ[MEMORY_CAP_ENV]) if os.environ.get(MEMORY_CAP_ENV) else None
        fraction = memory_fraction(cap, _gpu_total_bytes(rank.local_rank)) if cap and device == "cuda" else None
        os.environ.update(allocator_env(dict(os.environ), rank.world_size, device, fraction))
        if device != "cuda":
            pin_cpu_share(cpu_threads(spec, rank), rank.local_rank)  # XLA's CPU pool follows the cores it may use
        if cap and device != "cuda":
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        parallel.initialize(coordinator_address(rank), rank.world_size, rank.rank, rank.local_rank, device)
        import jax

        # fp32 dots and convolutions: TF32 (XLA's default on GPUs) or full FP32, as torch's engine sets them
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if spec.fp32_math == "tf32" else "float32")

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
        """All processes meet here (a no-op with one process)."""
        import jax
        from jax.experimental import multihost_utils

        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("dlperf")

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
        """Nothing to reset: XLA's allocator has no reset of its peak, so on JAX the peak includes warm-up
        (autotuning workspaces); the process's RSS peak counts from the start too."""

    def peak_memory_mib(self) -> dict[str, float]:
        import jax

        found = memory_keys(jax.local_devices()[0].memory_stats())
        if found is not None:
            return found
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {"rss": maxrss * (1 if sys.platform == "darwin" else 1024) / MIB}

    def shutdown(self) -> None:
        if self.rank.distributed:
            import jax

            jax.distributed.shutdown()
