"""The engine interface: what a rank needs from a framework, so the timed loop and the worker never import one.

An engine sets up this rank (process group, device), syncs the device, times steps without a per-step sync,
meets the other ranks (barrier, gather), reports peak memory. Its parent's side (`EngineHost`: the checks before
any process starts and the versions for the record) is a module of its own, host.py, that imports the framework
only where it must. A workload builds its step for a given engine (`Workload.builders`), reading the engine's
runtime (device, process group) itself.
"""

from __future__ import annotations

import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from dlperf.spec import RunSpec


def node_name() -> str:
    """The node as the launcher addresses it (network namespaces share one host name), else the host name."""
    return os.environ.get("DLPERF_NODE") or socket.gethostname()


@dataclass(frozen=True)
class RankEnv:
    """Where this process sits, from the launcher's environment (torchrun's variables)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environ(cls) -> RankEnv:
        port = os.environ.get("MASTER_PORT")
        return cls(
            rank=int(os.environ.get("RANK", "0")),
            world_size=int(os.environ.get("WORLD_SIZE", "1")),
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
            master_addr=os.environ.get("MASTER_ADDR"),
            master_port=int(port) if port else None,
        )


def cpu_threads(spec: RunSpec, rank: RankEnv) -> int:
    """This rank's threads on a CPU device: the spec's share (the parent makes `auto` a number for the whole
    sweep, from its own machine), at most this node's cores divided by its ranks (another host, or a `taskset`,
    may give fewer cores than the parent has), as torchrun divides them."""
    own = max(1, len(os.sched_getaffinity(0)) // rank.local_world_size)
    return min(spec.cpu_threads, own) if isinstance(spec.cpu_threads, int) else own


def pin_cpu_share(threads: int, local_rank: int) -> None:
    """Keep this process on `threads` of the node's cores, the local rank's own slice where they suffice: for a
    runtime that sizes its thread pool from the cores it may use (XLA's CPU client) rather than a setting."""
    cores = sorted(os.sched_getaffinity(0))
    if threads >= len(cores):
        return
    start = local_rank * threads
    os.sched_setaffinity(0, {cores[(start + i) % len(cores)] for i in range(threads)})


@dataclass(frozen=True)
class TrainStep:
    """One training iteration (one global batch) and how to read its loss.

    `run` returns the step's output (the loss on ranks that compute it, else None) without waiting for the
    device; `read_loss` turns an output into a float and is called by every rank at window edges only, so it
    may hold one collective (e.g. fetch the loss from the last pipeline stage).

    `own_clock`, where the step can tell, times this rank's own work per step without waiting for the others
    (a synchronous gradient all-reduce makes every rank's whole step equally long, hiding a straggler), and the
    step's phases where the step marks them; `own_measure` names what it times. `count_flops` counts the FLOPs of
    one step of the whole iteration (all ranks) at the run's shapes, called once on rank 0 after the timed loop.
    `model` holds this rank's `parameters` and `gradient_bytes` (its own shard under TP/PP), which `dlperf predict`
    reads from the record, and what the step measured of itself (the MoE routers' `moe`). `probes` are the step's
    own window probes (harness/loop.py's `WindowProbe`), started and stopped around the timed steps with the
    node's.

    `compile_s` is the compile time where the builder compiled the step ahead of time (JAX/XLA); else the
    first step measures it.

    `no_sync`, where the step reduces gradients across data-parallel ranks and can skip that, gives a context under
    which it does (DDP's no_sync()): `--ablate sync` times the step under it.
    """

    run: Callable[[], Any]
    read_loss: Callable[[Any], float | None]
    own_clock: StepClock | None = None
    own_measure: str = "step"
    count_flops: Callable[[], int] | None = None
    model: dict[str, Any] = field(default_factory=dict)
    compile_s: float | None = None
    no_sync: Callable[[], AbstractContextManager] | None = None
    probes: tuple[Any, ...] = ()


class StepClock(ABC):
    """Marks the end of every step and resolves the marks at window edges only."""

    @abstractmethod
    def start(self) -> None:
        """Open a window: the next mark measures from here."""

    @abstractmethod
    def mark(self) -> None: ...

    @abstractmethod
    def collect(self) -> list[float]:
        """Milliseconds of each step since `start`/the last collect, and reopen at the last mark."""

    def phases(self) -> dict[str, list[float]]:
        """Milliseconds of every collected step's phases (`metrics.step_phases.PHASES`) since `start`, where the
        clock times them (engines/torch/own_work.py); else empty."""
        return {}


class EngineHost(Protocol):
    """An engine's host.py, as the parent of a run calls it."""

    def preflight(self, spec: RunSpec, local: bool) -> None:
        """Refuse in one line what this engine cannot run, before any process starts; `local` says the devices are
        on this machine (then their count and the packages are checked here)."""

    def versions(self) -> dict[str, Any]:
        """The framework's versions and its device facts, for the record's environment."""


class Engine(ABC):
    """One framework's side of a rank; `setup` first, `shutdown` last."""

    name: str

    @abstractmethod
    def setup(self, spec: RunSpec, rank: RankEnv) -> None:
        """Pick the device, seed, join the other ranks."""

    @property
    @abstractmethod
    def device_type(self) -> str:
        """`cuda`, `cpu`, ... of this rank's device."""

    @abstractmethod
    def device_name(self) -> str: ...

    @abstractmethod
    def sync(self, outputs: Any = None) -> None:
        """Wait for the device work queued so far (or producing `outputs`)."""

    @abstractmethod
    def barrier(self) -> None: ...

    @abstractmethod
    def clock(self) -> StepClock: ...

    @abstractmethod
    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank (a picklable/JSON-able object)."""

    @abstractmethod
    def reset_peak_memory(self) -> None: ...

    @abstractmethod
    def peak_memory_mib(self) -> dict[str, float]:
        """This rank's peak since `reset_peak_memory`, one set of keys for every engine: `allocated` (live
        tensors) and `reserved` (held by the allocator) in MiB on a GPU, `rss` on the CPU."""

    def device_uuids(self) -> list[str] | None:
        """NVML UUIDs (`GPU-...`) of the GPUs this process sees, in the framework's order, where it can tell; None
        lets the node's meters map indices through CUDA_VISIBLE_DEVICES instead (machine/gpus.py)."""
        return None

    def cpu_threads(self) -> int | None:
        """The threads this rank computes with on a CPU device (None on an accelerator): what its CPU device is."""
        return len(os.sched_getaffinity(0)) if self.device_type == "cpu" else None

    @abstractmethod
    def shutdown(self) -> None: ...
