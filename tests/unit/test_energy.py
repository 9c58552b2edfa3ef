"""Energy metering: RAPL on a constructed powercap tree, NVML through a stand-in, and the reasons here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from dlperf.metrics.energy import EnergyMeter, EnergyReading, energy_result


def rapl_tree(root: Path, packages: dict[str, tuple[int, int]]) -> None:
    """package dir -> (energy_uj, max_energy_range_uj); a core sub-domain that must not be counted twice."""
    for name, (energy, wrap) in packages.items():
        (root / name).mkdir(parents=True)
        (root / name / "energy_uj").write_text(f"{energy}\n")
        (root / name / "max_energy_range_uj").write_text(f"{wrap}\n")
    (root / "intel-rapl:0:0").mkdir()
    (root / "intel-rapl:0:0" / "energy_uj").write_text("1\n")


def test_rapl_sums_packages_and_handles_wraparound(tmp_path):
    rapl_tree(tmp_path, {"intel-rapl:0": (1_000_000, 10_000_000), "intel-rapl:1": (9_500_000, 10_000_000)})
    meter = EnergyMeter("cpu", powercap_root=tmp_path)
    meter.start()
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("3100000\n")  # 3.1 J: +2.1 J
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("500000\n")  # wrapped: 10 - 9.5 + 0.5 = 1.0 J
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("999999999\n")
    reading = meter.stop()
    assert reading.method == "rapl" and reading.devices == 2
    assert reading.joules == pytest.approx(2.1 + 1.0)
    result = energy_result([reading], samples=31)
    assert result.joules_per_sample == pytest.approx(3.1 / 31)
    assert result.avg_watts_per_device == pytest.approx(3.1 / reading.seconds / 2)


def test_cpu_without_rapl_is_null_with_reason(tmp_path):
    meter = EnergyMeter("cpu", powercap_root=tmp_path / "none")
    meter.start()
    reading = meter.stop()
    assert reading.joules is None and "no RAPL package domains" in reading.reason
    result = energy_result([reading], samples=10)
    assert result.joules is None and result.method is None and "no RAPL" in result.reason


class FakeNVML(SimpleNamespace):
    """The few NVML calls the meter makes, for two devices: an energy counter in mJ, or power only."""

    class NVMLError(Exception):
        pass

    def __init__(self, counter: bool) -> None:
        super().__init__(counter=counter, energy_mj=[1000.0, 5000.0], shut=False)

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> float:
        if not self.counter:
            raise self.NVMLError("Not Supported")
        return self.energy_mj[handle]

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 250_000  # mW


def test_nvml_total_energy_counter_over_two_devices():
    nvml = FakeNVML(counter=True)
    meter = EnergyMeter("cuda", [0, 1], nvml=nvml)
    meter.start()
    nvml.energy_mj = [61_000.0, 125_000.0]  # +60 J and +120 J
    reading = meter.stop()
    assert (reading.joules, reading.devices, reading.method) == (180.0, 2, "nvml-total-energy") and nvml.shut


def test_nvml_power_sampling_fallback_integrates_constant_power():
    nvml = FakeNVML(counter=False)
    meter = EnergyMeter("cuda", [0, 1], nvml=nvml, sample_interval_s=0.01)
    meter.start()
    reading = meter.stop()
    assert reading.method == "nvml-power-sampling (100 Hz)"
    span = meter._samples[-1][0] - meter._samples[0][0]  # 2 x 250 W over the sampled span
    assert reading.joules == pytest.approx(500.0 * span)


def test_no_nvml_here_and_partial_nodes():
    meter = EnergyMeter("cuda", [0])
    meter.start()
    reading = meter.stop()
    assert reading.joules is None and ("NVML" in reading.reason or "nvidia-ml-py" in reading.reason)
    ok = EnergyReading(100.0, 10.0, 4, "nvml-total-energy")
    mixed = energy_result([ok, reading], samples=1000)
    assert mixed.joules is None and mixed.reason == reading.reason  # never a partial sum
    two = energy_result([ok, EnergyReading(60.0, 12.0, 4, "nvml-total-energy")], samples=1000)
    assert (two.joules, two.joules_per_sample, two.method) == (160.0, 0.16, "nvml-total-energy")
    assert two.avg_watts_per_device == pytest.approx(160.0 / 12.0 / 8)
