"""The PyTorch engine: one rank's process group, device, sync, step clock, gathers and memory peaks (the parent's
side, checks and versions, is host.py)."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist

from dlperf.engines.base import Engine, RankEnv, StepClock, cpu_threads, pin_cpu_share
from dlperf.engines.torch.clock import TorchStepClock, synchronize
from dlperf.engines.torch.host import device_kind
from dlperf.engines.torch.memory import peak_memory_mib, reset_peak
from dlperf.engines.torch.precision import set_fp32_math
from dlperf.errors import ConfigError
from dlperf.machine.gpus import nvml_names
from dlperf.spec import MEMORY_CAP_ENV, RunSpec


def apply_memory_cap(device: torch.device, cap_bytes: int) -> None:
    """maxbatch's cap: on CUDA a fraction of the device's memory for the caching allocator (an address-space cap
    would break CUDA's start-up, which maps far more virtual memory than it uses); on the CPU RLIMIT_AS."""
    if device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), device)
    else:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))


def resolve_device(choice: str, local_rank: int) -> torch.device:
    """Each rank owns the device of its local rank."""
    if device_kind(choice) != "cuda":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError("--device cuda asked for, but no CUDA device is visible: use --device cpu")
    return torch.device("cuda", local_rank)


class TorchEngine(Engine):
    name = "torch"

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.rank = RankEnv(0, 1, 0, 1)

    def setup(self, spec: RunSpec, rank: RankEnv) -> None:
        self.rank = rank
        self.device = resolve_device(spec.device, rank.local_rank)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest convolutions
            set_fp32_math(spec.fp32_math)
        else:  # a CPU device: its own slice of the cores, as a GPU is a device of its own
            threads = cpu_threads(spec, rank)
            pin_cpu_share(threads, rank.local_rank)
            torch.set_num_threads(threads)
        if rank.distributed:
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(backend, device_id=self.device if self.device.type == "cuda" else None)
        if os.environ.get(MEMORY_CAP_ENV):
            apply_memory_cap(self.device, int(os.environ[MEMORY_CAP_ENV]))
        torch.manual_seed(spec.seed)

    @property
    def device_type(self) -> str:
        return self.device.type

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"

    def sync(self, outputs: Any = None) -> None:
        synchronize(self.device)

    def barrier(self) -> None:
        if self.rank.distributed:
            dist.barrier()

    def clock(self) -> StepClock:
        return TorchStepClock(self.device)

    def gather(self, value: Any) -> list[Any]:
        if not self.rank.distributed:
            return [value]
        values: list[Any] = [None] * self.rank.world_size
        dist.all_gather_object(values, value)
        return values

    def cpu_threads(self) -> int | None:
        """torch's intra-op threads, which setup set to the rank's share."""
        return torch.get_num_threads() if self.device.type == "cpu" else None

    def reset_peak_memory(self) -> None:
        reset_peak(self.device)

    def peak_memory_mib(self) -> dict[str, float]:
        return peak_memory_mib(self.device)

    def device_uuids(self) -> list[str] | None:
        """NVML's names of the devices this process sees, in CUDA's order (after CUDA_VISIBLE_DEVICES)."""
        if self.device.type != "cuda":
            return None
        return nvml_names([str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())])

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
