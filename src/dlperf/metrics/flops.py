"""Model FLOPs of GPT and Llama training, the devices' peak TFLOP/s, and MFU, each defined once.

FLOPs per iteration follow the published formula for GPT training without activation recomputation
(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters", 2021, eq. 3 with the
recomputation term removed):

    F = 72 * B * s * l * h^2 * (1 + s / (6 h) + V / (12 l h))

with B the global batch (samples per iteration), s the sequence length, l the layers, h the hidden size and
V the vocabulary the output layer computes (the padded one). It counts forward and backward (x3) of every
matrix multiply, attention included; it is a property of the model, so it does not change with the layout.

Llama-class models follow the PaLM paper's count (Chowdhery et al. 2022, appendix B), as torchtitan, MaxText and
Megatron-Bridge report MFU: per token of training

    F = 6 N + 12 L H Q T

with N the parameters less the token embedding (a lookup, no matmul; the untied output layer counts), L the layers,
H the query heads, Q the head size and T the sequence length. The attention term counts the full T x T score
matrix, causal masking notwithstanding, as torchtitan does; activation recomputation is not counted. MaxText counts
the causal mask (maxtext_utils.py `calculate_tflops_training_per_device`: the attention FLOPs 4·B·S²·H·D halved
"due to causality", x3 for forward and backward; it did not between May 2024 and July 2025), i.e.

    F_causal = 6 N + 6 L H Q T

so the same run's MFU is 1.04-1.125x higher by the PaLM count than by MaxText's (Llama 3.1 8B at 4,096-8,192
tokens). A Llama record gives both: `mfu` (PaLM/torchtitan) and `mfu_causal` (MaxText), each with its formula.

Peak TFLOP/s come from the exact-name datasheet table in `dlperf.metrics.peaks`, which fails closed: a device
not in it (every CPU) has no peak, and MFU is then left empty with the reason, unless `--peak-tflops` gives one.
An fp32 run on a CUDA device with `--fp32-math tf32` (the default) runs its matmuls and convolutions on the TF32
tensor cores, so its MFU divides by the TF32 peak (about 7x the FP32 one on an H100), not the FP32 one.
Where `dlperf peak` stored a measured peak for this exact device and precision, `mfu_measured` sets the
achieved rate against it too, beside the datasheet MFU (which stays the figure that compares across sites).
"""

from __future__ import annotations

from pathlib import Path

from dlperf.metrics.peaks import (
    DEFAULT_PEAKS_FILE,
    lookup_peak,
    measured_peak,
    measured_source,
    read_stored,
    table_precision,
)


def gpt_flops_per_iteration(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> int:
    """72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)), expanded so that it stays an exact integer."""
    return (
        72 * batch * seq * layers * hidden**2 + 12 * batch * seq**2 * layers * hidden + 6 * batch * seq * hidden * vocab
    )


LLM_FLOPS_FORMULA = "6N + 12·L·H·Q·T per token (PaLM, Chowdhery et al. 2022; N without the token embedding)"


def llm_flops_per_token(non_embedding_params: int, layers: int, heads: int, head_dim: int, seq: int) -> int:
    """6N + 12·L·H·Q·T: forward and backward of every weight matmul, plus attention's scores and weighted values."""
    return 6 * non_embedding_params + 12 * layers * heads * head_dim * seq


LLM_FLOPS_FORMULA_CAUSAL = (
    "6N + 6·L·H·Q·T per token (MaxText's count: the attention term halved for the causal mask; N without the token "
    "embedding)"
)


def llm_flops_per_token_causal(non_embedding_params: int, layers: int, heads: int, head_dim: int, seq: int) -> int:
    """6N + 6·L·H·Q·T: the PaLM count with the masked half of the T x T attention left out, as MaxText counts."""
    return 6 * non_embedding_params + 6 * layers * heads * head_dim * seq


def peak_tflops(device_name: str, precision: str, tf32: bool = False) -> float | None:
    """The table's dense peak for this device and run precision (fp32, amp-bf16, amp-fp16), or None when unknown."""
    return lookup_peak(device_name, table_precision(precision, tf32)).tflops


def tflops_per_device(flops_per_iteration: float, seconds_per_iteration: float, devices: int) -> float:
    return flops_per_iteration / (seconds_per_iteration * devices) / 1e12


def mfu(
    achieved_tflops: float, device_name: str, precision: str, override: float | None, tf32: bool = False
) -> tuple[float | None, str | None]:
    """(MFU as a fraction, None) or (None, why it is empty)."""
    if override is not None:
        return achieved_tflops / override, None
    lookup = lookup_peak(device_name, table_precision(precision, tf32))
    if lookup.tflops is None:
        return None, f"{lookup.reason}: pass --peak-tflops"
    return achieved_tflops / lookup.tflops, None


def mfu_fields(
    flops_per_iteration: float | None,
    seconds_per_iteration: float,
    devices: int,
    device_name: str,
    precision: str,
    override: float | None,
    note: str | None = None,
    tf32: bool = False,
    peaks_file: str | Path | None = DEFAULT_PEAKS_FILE,
) -> dict[str, object]:
    """Record fields tflops_per_device, mfu, mfu_note and the peak's (mfu_peak_tflops, its source, device, table
    precision and the FLOPs convention), plus mfu_measured against a `dlperf peak` measurement where `peaks_file`
    holds one for this device; no FLOPs or no peak leave MFU null with the reason. `tf32`: fp32 ran on TF32."""
    table = table_precision(precision, tf32)
    lookup = lookup_peak(device_name, table)
    peak = {**lookup.as_record(), "mfu_peak_precision": table}
    if override is not None:
        peak.update(mfu_peak_tflops=override, mfu_peak_source="--peak-tflops", mfu_peak_note=None)
    measured = measured_peak(read_stored(peaks_file), device_name, table) if peaks_file else None
    peak.update(
        mfu_measured_peak_tflops=measured,
        mfu_measured_peak_source=measured_source(peaks_file, device_name, table) if measured else None,
    )
    if flops_per_iteration is None:
        return {"tflops_per_device": None, "mfu": None, "mfu_measured": None,
                "mfu_note": note or "no FLOPs per iteration", **peak}  # fmt: skip
    achieved = tflops_per_device(flops_per_iteration, seconds_per_iteration, devices)
    value, why = mfu(achieved, device_name, precision, override, tf32)
    return {"tflops_per_device": achieved, "mfu": value, "mfu_measured": achieved / measured if measured else None,
            "mfu_note": why, **peak}  # fmt: skip
