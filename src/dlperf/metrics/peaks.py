"""Datasheet peak TFLOP/s per device and precision, by exact device names, failing closed.

MFU is only as honest as its denominator. Published trackers show MFU of 104 % to 563 % from peak tables matched by
substring ("H100" taken as the SXM part on a PCIe card), sparse figures used as dense ones, or a default figure for
an unknown device. This table therefore:

- holds the **dense** figures (no 2:4 structured sparsity; the data sheets' starred values halved), at the vendor's
  boost clock, counting one multiply-add as 2 FLOPs (the FLOPs convention of `CONVENTION`);
- maps the names NVML and `torch.cuda.get_device_name` report to a device by an explicit list of exact names
  (case and spacing aside), never by substring;
- answers an unknown device, or a precision the device has no units for (V100 has no bf16, tf32 or fp8 tensor
  cores; A100 has no fp8), with None and the reason, never with a fallback figure.

Precisions: `fp32` is plain FP32 on the CUDA cores (PyTorch's default matmul precision), `tf32` the TF32 tensor-core
path (`torch.backends.cuda.matmul.allow_tf32`), `bf16`/`fp16` tensor cores with FP32 accumulation, `fp8` the FP8
tensor cores.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEAKS_SCHEMA = "dlperf.peak/1"
# where `dlperf peak` stores what it measured, and where a run's parent looks for it (DLPERF_PEAKS overrides)
DEFAULT_PEAKS_FILE = Path(os.environ.get("DLPERF_PEAKS", Path.home() / ".dlperf" / "peaks.json"))
CONVENTION = "dense (no structured sparsity), boost clock, 1 multiply-add = 2 FLOPs"
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")

_H100_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table 'NVIDIA H100 ... compared to A100'"
_H100_NVL = "NVIDIA H100 NVL product brief / H100 data sheet (per GPU), starred sparse figures halved"
_H200 = "NVIDIA H200 Tensor Core GPU data sheet (2024), starred sparse figures halved"
_A100 = "NVIDIA A100 Tensor Core GPU data sheet (2021), dense figures"
_V100 = "NVIDIA Tesla V100 / V100S data sheets (2019-2020); no TF32/BF16/FP8 units"
_L4 = "NVIDIA L4 Tensor Core GPU data sheet (2023), starred sparse figures halved"
_L40 = "NVIDIA L40 GPU data sheet (2022), dense figures"
_L40S = "NVIDIA L40S GPU data sheet (2023), dense figures"
_B200 = "NVIDIA HGX B200 specifications: 8-GPU totals / 8, tensor figures with sparsity halved"
_GB200 = "NVIDIA GB200 NVL72 specifications: 72-GPU totals / 72, tensor figures with sparsity halved"
_MI300X = "AMD Instinct MI300X data sheet (2023), peak matrix figures without sparsity"

# device -> ({precision: dense peak TFLOP/s}, source). A missing precision means the device has no such units.
PEAK_TABLE: dict[str, tuple[dict[str, float], str]] = {
    "H100 SXM": ({"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, _H100_WP),
    "H100 PCIe": ({"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}, _H100_WP),
    "H100 NVL": ({"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}, _H100_NVL),
    "H200 SXM": ({"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0}, _H200),
    "H200 NVL": ({"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}, _H200),
    "A100 SXM 40GB": ({"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, _A100),
    "A100 SXM 80GB": ({"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, _A100),
    "A100 PCIe 40GB": ({"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, _A100),
    "A100 PCIe 80GB": ({"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, _A100),
    "V100 SXM2": ({"fp32": 15.7, "fp16": 125.0}, _V100),
    "V100 PCIe": ({"fp32": 14.0, "fp16": 112.0}, _V100),
    "V100S PCIe": ({"fp32": 16.4, "fp16": 130.0}, _V100),
    "L4": ({"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5}, _L4),
    "L40": ({"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362.0}, _L40),
    "L40S": ({"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0}, _L40S),
    "B200": ({"fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0}, _B200),
    "GB200": ({"fp32": 90.0, "tf32": 1250.0, "bf16": 2500.0, "fp16": 2500.0, "fp8": 5000.0}, _GB200),
    "MI300X": ({"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}, _MI300X),
}

# Exact names as NVML / torch.cuda.get_device_name report them (compared case- and space-insensitively), plus the
# table's own keys so that a user may name a device outright.
DEVICE_NAMES: dict[str, str] = {
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA A100-SXM4-40GB": "A100 SXM 40GB",
    "NVIDIA A100-SXM4-80GB": "A100 SXM 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-PCIE-16GB": "V100 PCIe",
    "Tesla V100-PCIE-32GB": "V100 PCIe",
    "Tesla V100S-PCIE-32GB": "V100S PCIe",
    "NVIDIA L4": "L4",
    "NVIDIA L40": "L40",
    "NVIDIA L40S": "L40S",
    "NVIDIA B200": "B200",
    "NVIDIA GB200": "GB200",
    "AMD Instinct MI300X": "MI300X",
    **{key: key for key in PEAK_TABLE},
}

# dlperf's run precisions -> the table's; fp32 runs on TF32 tensor cores when the run allows TF32 matmuls.
RUN_PRECISIONS = {"fp32": "fp32", "amp-bf16": "bf16", "amp-fp16": "fp16", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


def _normalise(name: str) -> str:
    return re.sub(r"\s+", " ", name).strip().casefold()


_BY_NAME = {_normalise(name): device for name, device in DEVICE_NAMES.items()}


@dataclass(frozen=True)
class PeakLookup:
    """A peak with its source and convention, or (tflops None) the reason there is none."""

    device_name: str
    precision: str
    device: str | None
    tflops: float | None
    source: str | None
    convention: str = CONVENTION
    reason: str | None = None

    def as_record(self) -> dict[str, object]:
        """Record fields: mfu_peak_tflops, mfu_peak_source, mfu_peak_device, flops_convention, mfu_peak_note."""
        return {
            "mfu_peak_tflops": self.tflops,
            "mfu_peak_source": self.source,
            "mfu_peak_device": self.device,
            "flops_convention": self.convention,
            "mfu_peak_note": self.reason,
        }


def device_key(device_name: str) -> str | None:
    """The table's device for an NVML/torch device name, or None when the name is not one we know exactly."""
    return _BY_NAME.get(_normalise(device_name))


def table_precision(run_precision: str, allow_tf32: bool = False) -> str:
    """The table precision a run's matmuls use: fp32 runs are tf32 when TF32 matmuls are allowed."""
    precision = RUN_PRECISIONS.get(run_precision, run_precision)
    return "tf32" if precision == "fp32" and allow_tf32 else precision


def lookup_peak(device_name: str, precision: str) -> PeakLookup:
    """The dense datasheet peak of `device_name` at table precision `precision` (see `table_precision`)."""
    if precision not in PRECISIONS:
        reason = f"unknown precision {precision!r}: one of {', '.join(PRECISIONS)}"
        return PeakLookup(device_name, precision, None, None, None, reason=reason)
    device = device_key(device_name)
    if device is None:
        reason = f"no datasheet peak for device {device_name!r}: not one of the known exact names"
        return PeakLookup(device_name, precision, None, None, None, reason=reason)
    peaks, source = PEAK_TABLE[device]
    if precision not in peaks:
        reason = f"{device} has no {precision} units: no peak at this precision"
        return PeakLookup(device_name, precision, device, None, source, reason=reason)
    return PeakLookup(device_name, precision, device, peaks[precision], source)


def read_stored(path: str | Path = DEFAULT_PEAKS_FILE) -> dict[str, Any] | None:
    """The peaks file written by `dlperf peak`, or None when there is none (or it is not one)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == PEAKS_SCHEMA else None


def measured_peak(stored: dict[str, Any] | None, device_name: str, dtype: str) -> float | None:
    """The measured TFLOP/s of this exact device name and table dtype, for MFU against the measured peak."""
    entry = ((stored or {}).get("devices") or {}).get(device_name, {}).get(dtype)
    return entry["tflops"] if entry else None


def measured_source(path: str | Path, device_name: str, dtype: str) -> str:
    return f"measured by `dlperf peak` ({dtype} matmul on {device_name}), {path}"
