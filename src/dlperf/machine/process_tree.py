"""Peak memory of a process tree that dlperf did not write (an external command and every worker it starts).

A thread samples, every `interval` seconds, the resident set of each process under the root (psutil) and, where
NVML answers, the GPU memory NVML lists for those PIDs; the record keeps the peak sums. Sampling misses a spike
shorter than the interval, so both figures are lower bounds (named `*_sampled` in the record).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

INTERVAL_S = 0.5


def _tree(root_pid: int) -> list[Any]:
    import psutil

    try:
        root = psutil.Process(root_pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _host_bytes(procs: list[Any]) -> int:
    import psutil

    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


class TreeMemory:
    """Samples a process tree's host and GPU memory until stopped; `as_record` gives the peaks in MiB."""

    def __init__(self, root_pid: int, interval: float = INTERVAL_S) -> None:
        self.root_pid = root_pid
        self.interval = interval
        self.host_peak = 0
        self.gpu_peak: int | None = None
        self.gpu_note: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)
        self._nvml: Any = None

    def __enter__(self) -> TreeMemory:
        self._open_nvml()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5 * self.interval + 1)
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()

    def _open_nvml(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except Exception as error:  # noqa: BLE001 - no NVML (no GPU, no driver, not installed): host memory only
            self.gpu_note = f"GPU memory not sampled: {error or type(error).__name__}"

    def _gpu_bytes(self, pids: set[int]) -> int | None:
        nvml = self._nvml
        if nvml is None:
            return None
        total = 0
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if proc.pid in pids and proc.usedGpuMemory:
                        total += proc.usedGpuMemory
        except nvml.NVMLError as error:
            self.gpu_note = f"NVML could not list processes: {error}"
            return None
        return total

    def sample(self) -> None:
        procs = _tree(self.root_pid)
        self.host_peak = max(self.host_peak, _host_bytes(procs))
        gpu = self._gpu_bytes({p.pid for p in procs})
        if gpu is not None:
            self.gpu_peak = max(self.gpu_peak or 0, gpu)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def as_record(self) -> dict[str, Any]:
        mib = 2**20
        return {
            "host_memory_mib_sampled": round(self.host_peak / mib, 1),
            "gpu_memory_mib_sampled": None if self.gpu_peak is None else round(self.gpu_peak / mib, 1),
            "memory_note": self.gpu_note,
        }
