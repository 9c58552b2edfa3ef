"""What is measured over the timed window besides time, once per node (by its local rank 0): the machine's other
load (metrics/noise.py) and the energy of the node's devices (metrics/energy.py)."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from dlperf.machine.gpus import GpuId
from dlperf.metrics.energy import EnergyMeter
from dlperf.metrics.noise import LoadSnapshot, machine_load, take_snapshot


class LoadProbe:
    """Snapshots of the machine's load at the window's start and end. The run's own processes are the tree of this
    rank's parent, the node's launcher agent, so every local rank counts as ours. GPUs are named as NVML knows
    them (machine/gpus.py: UUIDs, or CUDA_VISIBLE_DEVICES entries)."""

    def __init__(self, gpu_indices: list[GpuId]) -> None:
        self.gpu_indices = gpu_indices
        self._start: LoadSnapshot | None = None
        self.result: dict[str, Any] | None = None

    def _snapshot(self) -> LoadSnapshot:
        return take_snapshot(root_pid=os.getppid(), extra_own_pids=[os.getpid()], gpu_indices=self.gpu_indices)

    def start(self) -> None:
        self._start = self._snapshot()

    def stop(self) -> None:
        self.result = machine_load(self._start, self._snapshot()).as_record()


class EnergyProbe:
    """The node's devices' energy over the window (NVML on GPUs, RAPL on CPUs, else null with the reason)."""

    def __init__(self, device_type: str, device_indices: list[GpuId]) -> None:
        self.meter = EnergyMeter(device_type, device_indices)
        self.result: dict[str, Any] | None = None

    def start(self) -> None:
        self.meter.start()

    def stop(self) -> None:
        self.result = asdict(self.meter.stop())
