"""`dlperf peak`: the matmul TFLOP/s a device actually sustains per dtype, to set MFU against beside the datasheet.

Datasheet peaks assume the boost clock and ideal shapes; what a device sustains under its power and thermal limits
is lower, and MFU against it says how much of the reachable speed a workload uses. For each dtype this
runs a sweep of GEMM shapes (C = A @ B with A m x k, B k x n), each as `repeats` timed runs of `iters` back-to-back
multiplies into one preallocated output between device syncs, after `warmup` untimed ones. A shape's figure is its
best run (the sustained rate when nothing else interfered); the dtype's figure is its best shape. One GEMM is
2·m·n·k FLOPs (`gemm_flops`), the convention of `dlperf.metrics.peaks`.

dtypes: fp32 (strict FP32, `torch.set_float32_matmul_precision("highest")`), tf32 (CUDA, "high"), bf16, fp16,
fp8 (e4m3 through `torch._scaled_mm`, PyTorch's only FP8 GEMM entry point, on compute capability 8.9 or newer;
bf16 output, unit scales, fast accumulation: `use_fast_accum=True`, the FP8 tensor cores' full rate, as FP8
training recipes run their forward GEMMs; without it cuBLAS promotes partial sums and reaches well below the
datasheet). torch is imported inside the functions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from dlperf.metrics.peaks import DEFAULT_PEAKS_FILE, PEAKS_SCHEMA, measured_peak, read_stored

__all__ = ["DEFAULT_PEAKS_FILE", "DTYPES", "measure_matmul", "measure_peaks", "measured_peak", "merge_stored",
           "read_stored"]  # fmt: skip

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
GPU_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192), (8192, 8192, 16384))
CPU_SHAPES = ((512, 512, 512), (1024, 1024, 1024))
METHOD = "torch matmul, best of repeats x iters back-to-back GEMMs between syncs, best shape"


def gemm_flops(m: int, n: int, k: int) -> int:
    """FLOPs of one (m x k) @ (k x n) product: m·n multiply-add chains of length k, 2 FLOPs each."""
    return 2 * m * n * k


def _unavailable(dtype: str, device: Any) -> str | None:
    import torch

    if dtype not in DTYPES:
        return f"unknown dtype {dtype!r}: one of {', '.join(DTYPES)}"
    if dtype == "tf32" and device.type != "cuda":
        return "tf32 is a CUDA tensor-core mode"
    if dtype == "fp8" and (device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 9)):
        return "fp8 GEMMs need a CUDA device of compute capability 8.9 or newer"
    return None


def _gemm(dtype: str, m: int, n: int, k: int, device: Any) -> Any:
    """A function computing A @ B of random operands (into a preallocated output, except fp8)."""
    import torch

    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
    torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    a = torch.randn(m, k, device=device, dtype=torch_dtype)
    b = torch.randn(k, n, device=device, dtype=torch_dtype)
    out = torch.empty(m, n, device=device, dtype=torch_dtype)
    return lambda: torch.matmul(a, b, out=out)


def measure_matmul(
    dtype: str,
    device: str = "cuda",
    shapes: Sequence[tuple[int, int, int]] | None = None,
    iters: int = 20,
    repeats: int = 3,
    warmup: int = 3,
) -> dict[str, Any]:
    """Best sustained matmul TFLOP/s of `dtype` on `device` over `shapes` (default: by device), with each shape's."""
    import torch

    dev = torch.device(device)
    shapes = shapes or (GPU_SHAPES if dev.type == "cuda" else CPU_SHAPES)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    result: dict[str, Any] = {"dtype": dtype, "device": str(dev), "device_name": name, "method": METHOD}
    reason = _unavailable(dtype, dev)
    if reason:
        return {**result, "tflops": None, "best_shape": None, "shapes": [], "reason": reason}

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    rows = []
    try:
        for m, n, k in shapes:
            gemm = _gemm(dtype, m, n, k, dev)
            for _ in range(warmup):
                gemm()
            best = float("inf")
            for _ in range(repeats):
                sync()
                start = time.perf_counter()
                for _ in range(iters):
                    gemm()
                sync()
                best = min(best, time.perf_counter() - start)
            flops = gemm_flops(m, n, k)
            rows.append(
                {"m": m, "n": n, "k": k, "flops_per_gemm": flops, "iters": iters, "seconds": best,
                 "tflops": flops * iters / best / 1e12}
            )  # fmt: skip
    finally:
        torch.set_float32_matmul_precision(previous)
    top = max(rows, key=lambda row: row["tflops"])
    return {**result, "tflops": top["tflops"], "best_shape": [top["m"], top["n"], top["k"]], "shapes": rows,
            "reason": None}  # fmt: skip


def measure_peaks(device: str = "cuda", dtypes: Sequence[str] = DTYPES, **sweep: Any) -> dict[str, dict[str, Any]]:
    """`dlperf peak`: `measure_matmul` for every dtype (unavailable ones carry their reason)."""
    return {dtype: measure_matmul(dtype, device, **sweep) for dtype in dtypes}


def merge_stored(stored: dict[str, Any] | None, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The peaks file's content with these results (one device's, per dtype) replacing that device's entries."""
    data = stored if stored and stored.get("schema") == PEAKS_SCHEMA else {"schema": PEAKS_SCHEMA, "devices": {}}
    for dtype, result in results.items():
        if result["tflops"] is not None:
            data["devices"].setdefault(result["device_name"], {})[dtype] = {**result, "measured_at": time.time()}
    return data
