"""Energy of the timed window: NVML counters on NVIDIA GPUs, RAPL on CPUs, or null with the reason.

Each node meters its own devices between `start()` and `stop()` around the timed window; `energy_result` sums the
nodes. Methods, in the order tried:

- `nvml-total-energy` (GPUs, Volta and newer): nvmlDeviceGetTotalEnergyConsumption, the board's energy counter
  in mJ since the driver loaded, read at start and stop on every device; exact for the window, no sampling.
- `nvml-power-sampling` (GPUs without the counter): nvmlDeviceGetPowerUsage (mW) read every 100 ms
  (`POWER_SAMPLE_INTERVAL_S`, 10 Hz) by a background thread, plus once at start and stop, integrated with the
  trapezoid rule; misses power swings shorter than the interval.
- `rapl` (CPUs): the package domains of /sys/class/powercap/intel-rapl:N (energy_uj, wrap-around at
  max_energy_range_uj). It measures whole sockets, other processes included; since Linux 5.10 energy_uj is
  readable by root only, and without it the result is null with that reason.

Result fields (record field `energy`): joules, joules_per_sample, avg_watts_per_device, method, reason.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.machine.gpus import GpuId, nvml_handles
from dlperf.records.parts import Energy

POWER_SAMPLE_INTERVAL_S = 0.1
POWERCAP_ROOT = Path("/sys/class/powercap")
_PACKAGE = re.compile(r"intel-rapl:\d+")


@dataclass(frozen=True)
class EnergyReading:
    """One node's devices over one window; joules None with the reason when they could not be metered."""

    joules: float | None
    seconds: float
    devices: int
    method: str | None
    reason: str | None = None


def load_nvml(nvml: Any | None = None) -> tuple[Any | None, str | None]:
    """NVML initialised (pynvml where `nvml` is None), or None with why not."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return None, "nvidia-ml-py is not installed"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as error:
        return None, f"NVML unavailable: {error}"
    return nvml, None


class EnergyMeter:
    """Meters the energy of one node's devices: `device_type` "cuda" (NVML names: indices or UUIDs, see
    machine/gpus.py) or "cpu" (RAPL packages)."""

    def __init__(
        self,
        device_type: str,
        device_indices: Sequence[GpuId] = (),
        nvml: Any | None = None,
        powercap_root: Path = POWERCAP_ROOT,
        sample_interval_s: float = POWER_SAMPLE_INTERVAL_S,
    ) -> None:
        self.device_type = device_type
        self.indices = list(device_indices)
        self._nvml_module = nvml
        self._nvml: Any | None = None
        self.powercap_root = powercap_root
        self.interval = sample_interval_s
        self.method: str | None = None
        self.reason: str | None = None
        self._start_time = 0.0
        self._handle_list: list[Any] | None = None
        self._start: list[float] = []
        self._samples: list[tuple[float, float]] = []  # (time, watts summed over devices)
        self._stop_sampling = threading.Event()
        self._thread: threading.Thread | None = None

    # -- NVML ------------------------------------------------------------------------------------------------
    def _handles(self) -> list[Any]:
        if self._handle_list is None:
            self._handle_list = nvml_handles(self._nvml, self.indices)
        return self._handle_list

    def _energy_mj(self) -> list[float]:
        return [float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self._handles()]

    def _watts(self) -> float:
        return sum(self._nvml.nvmlDeviceGetPowerUsage(h) for h in self._handles()) / 1000.0

    def _sample_loop(self) -> None:
        while not self._stop_sampling.wait(self.interval):
            self._samples.append((time.perf_counter(), self._watts()))

    def _start_nvml(self) -> None:
        self._nvml, self.reason = load_nvml(self._nvml_module)
        if self._nvml is None:
            return
        if not self.indices:
            self.reason = "no GPU indices given to meter"
            return
        try:
            self._start = self._energy_mj()
            self.method = "nvml-total-energy"
            return
        except self._nvml.NVMLError:
            pass  # no energy counter on this board: fall back to sampling power
        try:
            self._samples = [(time.perf_counter(), self._watts())]
        except self._nvml.NVMLError as error:
            self.reason = f"NVML has neither an energy counter nor power readings here: {error}"
            return
        self.method = f"nvml-power-sampling ({1 / self.interval:g} Hz)"
        self._thread = threading.Thread(target=self._sample_loop, name="dlperf-power", daemon=True)
        self._thread.start()

    def _stop_nvml(self) -> float:
        if self._thread is None:
            return sum(b - a for a, b in zip(self._start, self._energy_mj())) / 1000.0
        self._stop_sampling.set()
        self._thread.join()
        self._samples.append((time.perf_counter(), self._watts()))
        s = self._samples
        return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(s, s[1:]))

    # -- RAPL ------------------------------------------------------------------------------------------------
    def _packages(self) -> list[Path]:
        return sorted(p for p in self.powercap_root.glob("intel-rapl:*") if _PACKAGE.fullmatch(p.name))

    def _rapl_uj(self) -> list[float]:
        return [float((p / "energy_uj").read_text()) for p in self._packages()]

    def _start_rapl(self) -> None:
        packages = self._packages() if self.powercap_root.is_dir() else []
        if not packages:
            self.reason = f"no RAPL package domains under {self.powercap_root}"
            return
        try:
            self._start = self._rapl_uj()
        except OSError as error:
            self.reason = f"RAPL energy_uj not readable ({error.strerror}; root only since Linux 5.10)"
            return
        self.indices = list(range(len(packages)))
        self.method = "rapl"

    def _stop_rapl(self) -> float:
        total = 0.0
        for package, before, after in zip(self._packages(), self._start, self._rapl_uj()):
            delta = after - before
            if delta < 0:  # the counter wrapped once
                delta += float((package / "max_energy_range_uj").read_text())
            total += delta
        return total / 1e6

    # -- public ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._start_time = time.perf_counter()
        if self.device_type == "cuda":
            self._start_nvml()
            if self.method is None and self._nvml is not None:
                self._nvml.nvmlShutdown()
        elif self.device_type == "cpu":
            self._start_rapl()
        else:
            self.reason = f"no energy method for device type {self.device_type!r}"

    def stop(self) -> EnergyReading:
        seconds = time.perf_counter() - self._start_time
        if self.method is None:
            return EnergyReading(None, seconds, len(self.indices), None, self.reason)
        if self.device_type == "cuda":
            try:
                joules = self._stop_nvml()
            finally:
                self._nvml.nvmlShutdown()
        else:
            joules = self._stop_rapl()
        return EnergyReading(joules, seconds, len(self.indices), self.method)


def energy_result(readings: Sequence[EnergyReading], samples: float) -> Energy:
    """All nodes' readings summed over the window; null with the reasons if any node could not be metered."""
    reason = _unmetered(readings)
    if reason is not None:
        return Energy(None, None, None, None, reason)
    joules = sum(r.joules for r in readings)
    method = " + ".join(dict.fromkeys(r.method for r in readings))
    return Energy(joules, joules / samples if samples else None, _watts_per_device(joules, readings), method, None)


def _unmetered(readings: Sequence[EnergyReading]) -> str | None:
    """Why the window has no energy figure (a node not metered, or no readings); None where every node was."""
    missing = [r.reason or "not metered" for r in readings if r.joules is None]
    if readings and not missing:
        return None
    return "; ".join(dict.fromkeys(missing)) or "no energy readings"


def _watts_per_device(joules: float, readings: Sequence[EnergyReading]) -> float | None:
    """The mean power per device over the longest node's window."""
    devices = sum(r.devices for r in readings)
    seconds = max(r.seconds for r in readings)
    return joules / seconds / devices if seconds > 0 and devices else None
