"""`dlperf peak`'s core on the CPU with tiny GEMMs: figures consistent with a hand count of FLOPs."""

from __future__ import annotations

import pytest

from dlperf.metrics.peak_measure import gemm_flops, measure_matmul, measure_peaks


def test_tiny_cpu_sweep_is_consistent_with_a_hand_count():
    result = measure_matmul("fp32", "cpu", shapes=((64, 32, 16), (32, 32, 32)), iters=4, repeats=2, warmup=1)
    assert result["reason"] is None and result["device_name"] == "cpu"
    first, second = result["shapes"]
    assert first["flops_per_gemm"] == 2 * 64 * 32 * 16 == 65_536  # 64 x 32 outputs, 16 multiply-adds each
    assert second["flops_per_gemm"] == gemm_flops(32, 32, 32) == 65_536
    for row in result["shapes"]:
        assert row["seconds"] > 0
        assert row["tflops"] == pytest.approx(row["flops_per_gemm"] * 4 / row["seconds"] / 1e12)
    assert result["tflops"] == max(first["tflops"], second["tflops"]) > 0
    assert result["best_shape"] in ([64, 32, 16], [32, 32, 32])


def test_dtypes_without_units_here_say_why():
    results = measure_peaks("cpu", dtypes=("bf16", "tf32", "fp8"), shapes=((16, 16, 16),), iters=1, repeats=1)
    assert results["bf16"]["tflops"] > 0
    assert results["tf32"]["tflops"] is None and "CUDA" in results["tf32"]["reason"]
    assert results["fp8"]["tflops"] is None and "8.9" in results["fp8"]["reason"]
    assert "unknown dtype" in measure_matmul("int4", "cpu")["reason"]
