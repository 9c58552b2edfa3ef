"""Model FLOPs of GPT training, the devices' peak TFLOP/s, and MFU, each defined once.

FLOPs per iteration follow the published formula for GPT training without activation recomputation
(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters", 2021, eq. 3 with the
recomputation term removed):

    F = 72 * B * s * l * h^2 * (1 + s / (6 h) + V / (12 l h))

with B the global batch (samples per iteration), s the sequence length, l the layers, h the hidden size and
V the vocabulary the output layer computes (the padded one). It counts forward and backward (x3) of every
matrix multiply, attention included; it is a property of the model, so it does not change with the layout.

Peak TFLOP/s are the vendors' dense (no sparsity) figures per device: `fp32` is plain FP32 (PyTorch's
default matmul precision, not TF32); `amp-bf16`/`amp-fp16` are the tensor-core figures. Sources: NVIDIA's
V100, A100, H100 and H200 data sheets. A device not in the table (every CPU) has no peak: MFU is then left
empty with the reason, unless `--peak-tflops` gives one.
"""

from __future__ import annotations

# (substring of torch.cuda.get_device_name, {precision: dense peak TFLOP/s}); more specific names first.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"fp32": 51.2, "amp-bf16": 756.0, "amp-fp16": 756.0}),
    ("H100 NVL", {"fp32": 60.0, "amp-bf16": 835.0, "amp-fp16": 835.0}),
    ("H100", {"fp32": 66.9, "amp-bf16": 989.4, "amp-fp16": 989.4}),  # SXM5
    ("H200", {"fp32": 66.9, "amp-bf16": 989.4, "amp-fp16": 989.4}),
    ("A100", {"fp32": 19.5, "amp-bf16": 312.0, "amp-fp16": 312.0}),
    ("V100S", {"fp32": 16.4, "amp-fp16": 130.0}),
    ("V100", {"fp32": 15.7, "amp-fp16": 125.0}),  # SXM2; V100 has no bf16 tensor cores
)


def gpt_flops_per_iteration(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> int:
    """72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)), expanded so that it stays an exact integer."""
    return (
        72 * batch * seq * layers * hidden**2 + 12 * batch * seq**2 * layers * hidden + 6 * batch * seq * hidden * vocab
    )


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The table's dense peak for this device and precision, or None when unknown."""
    for key, peaks in PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            return peaks.get(precision)
    return None


def tflops_per_device(flops_per_iteration: float, seconds_per_iteration: float, devices: int) -> float:
    return flops_per_iteration / (seconds_per_iteration * devices) / 1e12


def mfu(
    achieved_tflops: float, device_name: str, precision: str, override: float | None
) -> tuple[float | None, str | None]:
    """(MFU as a fraction, None) or (None, why it is empty)."""
    peak = override if override is not None else peak_tflops(device_name, precision)
    if peak is None:
        return None, f"no peak TFLOP/s known for {device_name} at {precision}: pass --peak-tflops"
    return achieved_tflops / peak, None
