"""CUDA paths (events, allocator peaks, fp16 loss scaling, compile): run where a GPU exists, skipped elsewhere."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import run_dlperf

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

CUDA_TINY = [
    "--model", "resnet50", "--image-size", "64", "--num-classes", "10", "--batch-size", "16",
    "--warmup-iters", "3", "--iters", "10", "--print-every", "5", "--device", "cuda",
]  # fmt: skip


@pytest.mark.parametrize(
    "extra", [["--precision", "fp32"], ["--precision", "amp-fp16"], ["--precision", "amp-bf16", "--channels-last"]]
)
def test_cuda_run(tmp_path, extra):
    done = run_dlperf(["run", *CUDA_TINY, *extra, "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.rglob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["device_type"] == "cuda"
    memory = record["peak_memory_mib"]
    assert 0 < memory["allocated"] <= memory["reserved"]
    assert 0 < record["latency_ms"]["p50"] <= record["latency_ms"]["p90"]
    # CUDA-event step times must add up to about the host-timed window
    assert record["latency_ms"]["mean"] * 10 / 1000 == pytest.approx(record["elapsed_s"], rel=0.2)
    assert record["env"]["gpus"] and record["env"]["cuda"]


def test_cuda_compile_records_compile_time(tmp_path):
    done = run_dlperf(["run", *CUDA_TINY, "--compile", "--out", str(tmp_path)], timeout=600)
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.rglob("*.json")
    record = json.loads(path.read_text())
    assert record["compile_s"] == record["first_step_s"] > record["latency_ms"]["mean"] / 1000
