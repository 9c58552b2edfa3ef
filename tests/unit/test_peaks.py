"""The exact-name peak table: known names, lookalikes that must not match, precisions without units."""

from __future__ import annotations

import pytest

from dlperf.metrics.flops import mfu
from dlperf.metrics.peaks import DEVICE_NAMES, PEAK_TABLE, PRECISIONS, device_key, lookup_peak, table_precision


@pytest.mark.parametrize(
    ("name", "device"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("nvidia  h100 80gb hbm3 ", "H100 SXM"),  # case and spacing aside
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA B200", "B200"),
        ("L4", "L4"),  # the table's own key
    ],
)
def test_known_names(name, device):
    assert device_key(name) == device


@pytest.mark.parametrize("name", ["NVIDIA H100", "NVIDIA H800", "NVIDIA GH200 480GB", "H100", "cpu", "NVIDIA L40G"])
def test_lookalikes_fail_closed(name):
    peak = lookup_peak(name, "bf16")
    assert peak.tflops is None and peak.source is None and "no datasheet peak" in peak.reason


def test_figures_sources_and_missing_units():
    h100 = lookup_peak("NVIDIA H100 80GB HBM3", "bf16")
    assert (h100.tflops, h100.device) == (989.4, "H100 SXM") and "whitepaper" in h100.source
    assert "dense" in h100.convention and "2 FLOPs" in h100.convention
    assert lookup_peak("NVIDIA H100 PCIe", "fp8").tflops == 1513.0
    assert lookup_peak("NVIDIA L40S", "tf32").tflops == 183.0  # 366 with sparsity, halved
    v100 = lookup_peak("Tesla V100-SXM2-16GB", "bf16")
    assert v100.tflops is None and "no bf16 units" in v100.reason and v100.device == "V100 SXM2"
    assert lookup_peak("NVIDIA A100-SXM4-80GB", "fp8").tflops is None
    assert "unknown precision" in lookup_peak("NVIDIA L4", "int4").reason
    record = h100.as_record()
    assert record["mfu_peak_tflops"] == 989.4 and record["mfu_peak_note"] is None
    assert set(DEVICE_NAMES.values()) == set(PEAK_TABLE)  # every device is reachable by a name
    for peaks, source in PEAK_TABLE.values():
        assert set(peaks) <= set(PRECISIONS) and source
        # tensor-core bf16 is never below plain fp32, and fp8 (where present) is twice bf16 on these parts
        assert peaks.get("bf16", peaks.get("fp16")) > peaks.get("fp32", 0.0)
        if "fp8" in peaks:
            assert peaks["fp8"] == pytest.approx(2 * peaks["bf16"], rel=0.02)  # L40S: 733 vs 2 x 362.05


def test_run_precisions_and_mfu():
    assert table_precision("amp-bf16") == "bf16" and table_precision("fp32") == "fp32"
    assert table_precision("fp32", allow_tf32=True) == "tf32"
    assert mfu(494.7, "NVIDIA H100 80GB HBM3", "amp-bf16", None) == (pytest.approx(0.5), None)
    value, note = mfu(10.0, "NVIDIA H800", "amp-bf16", None)
    assert value is None and "NVIDIA H800" in note and "pass --peak-tflops" in note
