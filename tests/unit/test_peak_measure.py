"""`dlperf peak`'s core on the CPU with tiny GEMMs: figures consistent with a hand count of FLOPs."""

from __future__ import annotations

import json
import sys

import pytest

from dlperf.engines.torch.peak import gemm_flops, measure_matmul, measure_peaks, measured_peak, read_stored


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


def peak_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """`dlperf peak` through its own parser."""
    from dlperf.cli.main import build_parser
    from dlperf.errors import DlperfError

    parsed = build_parser(["peak", *args]).parse_args(["peak", *args])
    try:
        code = parsed.func(parsed)
    except DlperfError as error:
        print(f"dlperf: error: {error}", file=sys.stderr)
        code = error.exit_code
    out, err = capsys.readouterr()
    return code, out, err


def test_peak_command_stores_and_reads_back(tmp_path, capsys):
    out = tmp_path / "peaks.json"
    args = ["--device", "cpu", "--dtypes", "fp32,tf32", "--shapes", "32x32x32,16x64x8", "--iters", "2"]
    code, text, err = peak_cli([*args, "--out", str(out), "--json"], capsys)
    assert code == 0, err
    printed = json.loads(text)
    stored = read_stored(out)
    assert stored["devices"]["cpu"]["fp32"]["tflops"] == printed["fp32"]["tflops"] > 0
    assert "tf32" not in stored["devices"]["cpu"]  # nothing measured, nothing stored
    assert measured_peak(stored, "cpu", "fp32") == printed["fp32"]["tflops"]
    assert measured_peak(stored, "NVIDIA H100 80GB HBM3", "bf16") is None
    assert [row["flops_per_gemm"] for row in printed["fp32"]["shapes"]] == [65_536, 16_384]
    code, _, err = peak_cli(["--device", "cpu", "--shapes", "32x32", "--out", str(out)], capsys)
    assert code == 2 and "--shapes must be MxNxK" in err and len(err.strip().splitlines()) == 1
