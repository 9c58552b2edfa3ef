"""MFU in both conventions a Llama record carries: the PaLM count torchtitan reports (attention's full T x T) and
MaxText's causal count (its half), each against the same datasheet peak, with the peaks of the newer parts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.published_names import parse_log_path
from dlperf.metrics.flops import LLM_FLOPS_FORMULA, LLM_FLOPS_FORMULA_CAUSAL
from dlperf.metrics.peaks import lookup_peak
from dlperf.orchestration.evidence_fields import causal_mfu
from dlperf.workloads import spec_from_mapping
from dlperf.workloads.llama import flops_per_token

# Llama 3.1 8B as Meta publishes it: 8,030,261,248 parameters, the 128,256 x 4,096 token embedding among them
N_8B = 8_030_261_248 - 128_256 * 4_096


@pytest.mark.parametrize(("seq", "ratio"), [(4096, 1.0667), (8192, 1.1251)])
def test_palm_over_maxtext_count_for_llama_3_1_8b(seq, ratio):
    """By hand: 6N + 12·L·H·Q·T against 6N + 6·L·H·Q·T with L 32, H 32, Q 128: the PaLM count is 1.07x MaxText's
    at 4,096 tokens and 1.125x at 8,192 (the issue's 1.04-1.125x)."""
    config = spec_from_mapping({"model": "llama", "size": "8b", "seq_length": seq}).workload
    attention = 32 * 32 * 128 * seq
    assert flops_per_token(config) == 6 * N_8B + 12 * attention
    assert flops_per_token(config, causal=True) == 6 * N_8B + 6 * attention
    assert flops_per_token(config) / flops_per_token(config, causal=True) == pytest.approx(ratio, abs=1e-4)
    assert "12·L·H·Q·T" in LLM_FLOPS_FORMULA and "6·L·H·Q·T" in LLM_FLOPS_FORMULA_CAUSAL


def test_causal_mfu_uses_the_same_peak():
    spec = spec_from_mapping({"model": "llama", "size": "8b", "nodes": 1, "devices_per_node": 8})
    fields = {"mfu_peak_tflops": 989.4, "mfu": 0.5}
    out = causal_mfu(fields, causal=8 * 1e15, seconds_per_iteration=2.0, spec=spec)
    assert out["tflops_per_device_causal"] == pytest.approx(8e15 / 2.0 / 8 / 1e12)  # 500 TFLOP/s per device
    assert out["mfu_causal"] == pytest.approx(500 / 989.4)
    assert causal_mfu({"mfu_peak_tflops": None}, 1e15, 1.0, spec)["mfu_causal"] is None
    assert causal_mfu(fields, None, 1.0, spec) == {}


@pytest.mark.parametrize(
    ("name", "precision", "tflops", "device"),
    [
        ("NVIDIA GB200", "bf16", 2500.0, "GB200"),  # NVL72: 360 PF bf16 with sparsity / 72 / 2
        ("NVIDIA GB200", "fp4", 10000.0, "GB200"),
        ("NVIDIA B200", "fp4", 9000.0, "B200"),  # HGX B200: 144 PF fp4 with sparsity / 8 / 2
        ("NVIDIA H200", "int8", 1979.0, "H200 SXM"),
        ("TPU v5 lite", "bf16", 197.0, "TPU v5e"),  # JAX's device_kind for a v5e chip
        ("TPU v5p", "bf16", 459.0, "TPU v5p"),
        ("TPU v6 lite", "bf16", 918.0, "TPU v6e"),
        ("TPU v6 lite", "int8", 1836.0, "TPU v6e"),
        ("AMD Instinct MI300X", "bf16", 1307.4, "MI300X"),
        ("AMD Instinct MI325X", "fp8", 2614.9, "MI325X"),
    ],
)
def test_datasheet_peaks_of_the_newer_parts(name, precision, tflops, device):
    peak = lookup_peak(name, precision)
    assert (peak.tflops, peak.device) == (tflops, device) and peak.source


def test_a_tpu_has_no_fp32_peak_and_gb200_no_guessed_fp32():
    assert "no fp32 units" in lookup_peak("TPU v5p", "fp32").reason
    assert lookup_peak("NVIDIA GB200", "fp32").tflops is None


LLM = Path(__file__).parents[1] / "fixtures" / "peer-logs" / "llm"


def test_a_tpu_log_gets_mfu_from_its_printed_tflops_against_the_named_peak():
    """MaxText's guide run on a v5p-8 prints TFLOP/s/device each step; its guide reads step 9: 134.924 / 459 = 29.40 %.
    `--accelerator "TPU v5p"`: the mean of the window's printed figures (steps 2-9) over v5p's 459 bf16 TFLOP/s,
    the record naming that peak and MaxText's own FLOPs count. maxtest's v6e-32 log: over v6e's 918."""
    guide = read_run(
        parse_log_path(LLM / "maxtext/1n4g/guide-v5p8-deepseek2-16b_b24_bf16_1.log"), Options(accelerator="TPU v5p")
    )
    printed = [
        float(x)
        for x in re.findall(
            r"TFLOP/s/device: ([\d.]+)", (LLM / "maxtext/1n4g/guide-v5p8-deepseek2-16b_b24_bf16_1.log").read_text()
        )
    ]
    assert guide["mfu"] == pytest.approx(sum(printed[2:]) / 8 / 459)
    assert guide["mfu"] == pytest.approx(134.924 / 459, abs=0.005)  # the guide's step-9 reading, 29.40 %
    assert (guide["mfu_peak_device"], guide["mfu_peak_tflops"], guide["mfu_peak_precision"]) == (
        "TPU v5p",
        459.0,
        "bf16",
    )
    assert "MaxText" in guide["flops_source"]
    maxtest = read_run(
        parse_log_path(LLM / "maxtext/8n4g/maxtest-v6e32_b12_bf16_1.log"), Options(accelerator="TPU v6 lite")
    )
    assert maxtest["mfu"] == pytest.approx((193.354 + 194.526) / 2 / 918)
    unknown = read_run(parse_log_path(LLM / "maxtext/8n4g/maxtest-v6e32_b12_bf16_1.log"), Options(accelerator="TPU v9"))
    assert unknown["mfu"] is None and "no datasheet peak for device 'TPU v9'" in unknown["mfu_note"]
