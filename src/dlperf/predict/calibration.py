"""Where a prediction's device and link figures come from, best first: what dlperf measured (a one-device run
record's achieved rate, `dlperf peak`'s matmul rate, `dlperf commbench` fits), else the data sheet with the
achieved efficiency fitted to published runs of the same software stack; every figure carries its source; the
`Setting` made of them all (`setting_for`).

The default efficiencies are fitted (benchmarks/predict_llama_fit.py), one point per stack, precision and device
class, to the 6 published Llama runs in `workloads/llama/llama_published.json` marked `fit`: torchtitan's 8-GPU
FSDP rows (eager, compiled, compiled float8) on its reference H100s (96 GB HBM2e at 500 W), the H200 4-node row
(the scale of full-power Hopper), the A100 8B row (the A100's scale) and NeMo's 8-GPU Llama 2 7B row (Megatron's
float8 figure; its bf16 one keeps torchtitan-compile's bf16-to-fp8 ratio, as eager torchtitan's float8 does). The
other 49 published points, 18 of them at 576 to 2,304 GPUs, are held out and checked
(tests/unit/test_predict_llama.py, docs/scaling.md). They are fractions of the dense datasheet peak on the
records' FLOPs (recomputation and communication modelled apart).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from dlperf.errors import ConfigError
from dlperf.metrics.peaks import measured_peak, read_stored
from dlperf.predict.accelerators import Accelerator, accelerator
from dlperf.predict.model import Link
from dlperf.predict.setting import Device, Network, Setting, Training

# Fitted by benchmarks/predict_llama_fit.py; do not edit by hand. On the reference device, torchtitan's H100 at
# 500 W: stack -> (efficiency at the run precision, efficiency of the float8 linears at the fp8 peak).
STACK_EFFICIENCY: dict[str, tuple[float, float]] = {
    "torchtitan": (0.3802, 0.2685),  # eager float8 keeps compile's fp8-to-bf16 ratio (no eager float8 point)
    "torchtitan-compile": (0.4403, 0.311),
    "megatron": (0.4682, 0.3307),  # no bf16-only Megatron point: bf16 keeps compile's bf16-to-fp8 ratio
}
# device -> scale on the stack's efficiencies: full-power Hopper from the H200 point, A100 from its 8B point; the
# other devices take full-power Hopper's, unchecked (the output says so)
REFERENCE_DEVICE = "H100 SXM 96GB 500W"
DEVICE_SCALE: dict[str, float] = {"hopper": 1.2783, "A100": 1.6365}
# Blackwell Ultra (B300, GB300): the same dense peaks as B200 / GB200 in the data sheets, yet Megatron-Bridge's
# Qwen3-30B-A3B ran 1.22 x faster on 8 GB300s than in the identical layout on 8 GB200s (the higher power limit,
# the doubled attention softmax units); fitted on its DeepSeek-V3 BF16 run on 256 GB300s by
# benchmarks/predict_moe_fit.py (no dense point checks it); do not edit by hand
DEVICE_SCALE["blackwell-ultra"] = 1.6897
DEVICE_CLASS = {"A100 SXM 40GB": "A100", "A100 SXM 80GB": "A100", "A100 PCIe 80GB": "A100", "B300": "blackwell-ultra",
                "GB300": "blackwell-ultra"}  # fmt: skip
CHECKED_DEVICES = ("H100 SXM 96GB 500W", "H100 SXM", "H200 SXM", "A100 SXM 80GB")
MOE_CHECKED_DEVICES = ("B200", "GB200", "GB300")  # Hopper's scale (GB300: its own) against Megatron-Bridge's MoE
STACKS = tuple(STACK_EFFICIENCY)
STACK_RECOMPUTE = {"torchtitan": 0.5, "torchtitan-compile": 0.5, "megatron": 0.0}
# Transformer Engine's stacks: its CP ring passes keys and values at their own (GQA) heads, its fused layers keep a
# block's activations sharded by sequence parallelism
TE_STACKS = ("megatron",)
LINK_EFFICIENCY = 0.8  # achieved share of a datasheet link rate (assumed, not fitted): commbench fits replace it
INTRA_LATENCY_US = 5.0  # per ring step inside a node (assumed)
INTER_LATENCY_US = 10.0  # per ring step between nodes (assumed)


@dataclass(frozen=True)
class Measured:
    """What dlperf measured for this prediction, any of it absent."""

    peaks_file: str | None = None  # `dlperf peak`'s store
    device_name: str | None = None  # the name it was measured under (NVML's), default the accelerator's
    run_tflops: float | None = None  # a one-device Llama run record's achieved TFLOP/s on this accelerator
    efficiency: float | None = None  # given outright


def device_model(acc: Accelerator, precision: str, stack: str, measured: Measured, float8: bool) -> Device:
    """The device's rates: the run precision's datasheet peak times an efficiency from, in order, --efficiency, a
    one-device record (its achieved TFLOP/s over the peak), the stack's fit capped by `dlperf peak`'s measured
    matmul rate over the peak where one is stored (a device below its data sheet — power cap, clocks — caps it)."""
    table = {"fp32": "fp32", "amp-fp16": "fp16"}.get(precision, "bf16")
    peak = acc.peak_tflops(table)
    if peak is None:
        raise ConfigError(f"{acc.name} has no {table} units: pick another --precision")
    fitted, fp8_efficiency, where = _fitted_efficiency(acc, stack)
    efficiency, where = _efficiency(acc, table, peak, measured, (fitted, where))
    fp8_peak = acc.peak_tflops("fp8")
    if float8 and fp8_peak is None:
        raise ConfigError(f"{acc.name} has no fp8 units: drop --float8")
    source = {"peak": f"datasheet {peak:g} TFLOP/s ({acc.source})", "efficiency": f"{efficiency:.3f}, {where}"}
    return Device(peak, efficiency, acc.memory_bytes, acc.memory_tbs * 1e12, fp8_peak, fp8_efficiency, source)


def _fitted_efficiency(acc: Accelerator, stack: str) -> tuple[float, float, str]:
    """(efficiency, fp8 efficiency, where from): the stack's fit to published runs, scaled to the device's class."""
    efficiency, fp8_efficiency = STACK_EFFICIENCY[stack]
    scale = 1.0 if acc.name == REFERENCE_DEVICE else DEVICE_SCALE[DEVICE_CLASS.get(acc.name, "hopper")]
    where = f"fitted to published {stack} runs (predict/calibration.py)"
    if acc.name in MOE_CHECKED_DEVICES:
        where += f"; {acc.name}'s checked on published MoE runs only (docs/scaling.md)"
    elif acc.name not in CHECKED_DEVICES:
        where += f"; {acc.name} takes full-power Hopper's, no published run of it checked"
    return efficiency * scale, fp8_efficiency * scale, where


def _efficiency(
    acc: Accelerator, table: str, peak: float, measured: Measured, fitted: tuple[float, str]
) -> tuple[float, str]:
    """(efficiency, where from): given outright, else a one-device run record's achieved TFLOP/s over the peak,
    else the `fitted` one capped by `dlperf peak`'s measured matmul rate over the peak where that is lower."""
    if measured.efficiency is not None:
        return measured.efficiency, "given (--efficiency)"
    if measured.run_tflops is not None:
        achieved = measured.run_tflops
        if not math.isfinite(achieved) or achieved <= 0:
            raise ConfigError("the calibration record has no tflops_per_device: give a successful Llama run record")
        return achieved / peak, f"measured: a one-device run record, {achieved:.1f} TFLOP/s"
    if not measured.peaks_file:
        return fitted
    rate = measured_peak(read_stored(measured.peaks_file), measured.device_name or acc.name, table)
    if rate is not None and rate / peak < fitted[0]:
        return rate / peak, f"capped by the measured matmul peak, {rate:.1f} TFLOP/s (dlperf peak)"
    return fitted


def links(
    acc: Accelerator,
    intra_gbs: float | None = None,
    inter_gbit: float | None = None,
    intra_latency_us: float | None = None,
    inter_latency_us: float | None = None,
    intra_fit: Link | None = None,
    inter_fit: Link | None = None,
) -> tuple[Link, Link, dict[str, str]]:
    """(intra-node link, each device's inter-node link, their sources): a commbench fit, else the flags, else the
    accelerator's usual system at LINK_EFFICIENCY."""
    sources = {}

    def one(fit: Link | None, rate: float | None, default: float, latency: float | None, base: float, name: str):
        if fit is not None:
            sources[name] = "measured: dlperf commbench fit"
            return fit
        given = rate is not None
        rate = rate if given else default * LINK_EFFICIENCY
        latency = latency if latency is not None else base
        what = f"given: {rate:g} GB/s" if given else f"datasheet {default:g} GB/s x {LINK_EFFICIENCY} ({acc.system})"
        sources[name] = f"{what}, {latency:g} us per step"
        return Link.from_bandwidth(rate * 1e9, latency * 1e-6)

    intra = one(intra_fit, intra_gbs, acc.scale_up_gbs, intra_latency_us, INTRA_LATENCY_US, "intra_node")
    inter = one(
        inter_fit, inter_gbit / 8 if inter_gbit else None, acc.inter_node_gbit / 8, inter_latency_us,
        INTER_LATENCY_US, "inter_node",
    )  # fmt: skip
    return intra, inter, sources


def setting_for(acc_name: str, devices_per_node: int, precision: str, stack: str, training: Training,
                measured: Measured | None = None, overrides: Mapping[str, Any] | None = None) -> Setting:  # fmt: skip
    """Device and links for --accelerator with the measured figures and flags in `overrides` (memory_gib,
    memory_tbs, intra_node_gbs, inter_node_gbit, latencies in us, intra/inter commbench Link fits, and each
    collective's own fit: intra_op_fits, inter_op_fits)."""
    o = dict(overrides or {})
    acc = accelerator(acc_name)
    acc = replace(acc, **{k: o[k] for k in ("memory_gib", "memory_tbs") if o.get(k) is not None})
    training = replace(training, cp_kv_heads=stack in TE_STACKS, te_layers=stack in TE_STACKS)
    device = device_model(acc, precision, stack, measured or Measured(), training.float8)
    intra, inter, sources = links(acc, o.get("intra_node_gbs"), o.get("inter_node_gbit"), o.get("intra_latency_us"),
                                  o.get("inter_latency_us"), o.get("intra_fit"), o.get("inter_fit"))  # fmt: skip
    ops = {side: dict(o.get(f"{side}_op_fits") or {}) for side in ("intra", "inter")}
    for side, fits in ops.items():
        if fits and o.get(f"{side}_fit") is not None:
            sources[f"{side}_node"] = f"measured: dlperf commbench fits, each collective its own ({', '.join(fits)})"
    network = Network(devices_per_node, intra, inter, ops["intra"], ops["inter"])
    return Setting(acc, device, network, training, {**device.source, **sources})
