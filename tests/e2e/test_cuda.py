"""CUDA paths (events, allocator peaks, fp16 loss scaling without host syncs, every compile mode of both workloads,
TF32, energy and MFU fields): run where a GPU exists, skipped elsewhere. benchmarks/gpu_validate.py runs this file
in its first phase."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import run_dlperf

from dlperf.spec import COMPILE_MODES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

TIMING = ["--warmup-iters", "3", "--iters", "10", "--print-every", "5", "--device", "cuda"]
CUDA_TINY = ["--model", "resnet50", "--image-size", "64", "--num-classes", "10", "--batch-size", "16", *TIMING]
GPT_TINY = [
    "--model", "gpt", "--num-layers", "2", "--hidden-size", "256", "--num-heads", "4", "--seq-length", "128",
    "--vocab-size", "1024", "--micro-batch-size", "4", *TIMING,
]  # fmt: skip
# NVML's energy counter moves in steps of tens of ms: a window of ~30 ms (GPT_TINY's 10 steps) may read 0 J or any
# wattage. About 3.3 TFLOP per step (6 x 58M parameters x 8,192 tokens and the attention), ~18 ms on an H100 at
# TF32, 100 steps: a window of about 2 s (the CPU-bound small steps of a slower card take longer still)
GPT_ENERGY = [
    "--model", "gpt", "--num-layers", "4", "--hidden-size", "1024", "--num-heads", "16", "--seq-length", "1024",
    "--vocab-size", "8192", "--micro-batch-size", "8", "--warmup-iters", "5", "--iters", "100", "--print-every",
    "50", "--device", "cuda",
]  # fmt: skip


def _record(tmp_path, args: list[str], timeout: float = 600) -> dict:
    done = run_dlperf(["run", *args, "--out", str(tmp_path)], timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = tmp_path.rglob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["device_type"] == "cuda"
    return record


@pytest.mark.parametrize(
    "extra", [["--precision", "fp32"], ["--precision", "amp-fp16"], ["--precision", "amp-bf16", "--channels-last"]]
)
def test_cuda_run(tmp_path, extra):
    record = _record(tmp_path, [*CUDA_TINY, *extra])
    memory = record["peak_memory_mib"]
    assert 0 < memory["allocated"] <= memory["reserved"]
    assert 0 < record["latency_ms"]["p50"] <= record["latency_ms"]["p90"]
    # CUDA-event step times must add up to about the host-timed window
    assert record["latency_ms"]["mean"] * 10 / 1000 == pytest.approx(record["elapsed_s"], rel=0.2)
    assert record["env"]["gpus"] and record["env"]["cuda"]


@pytest.mark.parametrize("model", ["resnet50", "gpt"])
@pytest.mark.parametrize("mode", COMPILE_MODES)
def test_every_compile_mode(tmp_path, model, mode):
    args = CUDA_TINY if model == "resnet50" else GPT_TINY
    record = _record(tmp_path, [*args, "--precision", "amp-bf16", "--compile", "--compile-mode", mode], timeout=900)
    assert record["compile_s"] == record["first_step_s"] > record["latency_ms"]["mean"] / 1000
    assert record["loss_last"] == record["loss_last"]  # not NaN


def test_tf32_state_energy_and_mfu_fields(tmp_path):
    record = _record(tmp_path / "tf32", [*GPT_ENERGY, "--precision", "fp32"])
    assert record["tf32"] == {"matmul": True, "conv": True}
    assert record["tflops_per_device"] > 0 and record["flops_per_iteration"] > 0
    if record["mfu_peak_device"] is not None:  # a device of the peak table: MFU against its TF32 peak
        assert record["mfu_peak_precision"] == "tf32" and 0 < record["mfu"] < 1
    energy = record["energy"]
    assert energy["method"].startswith("nvml") and energy["joules"] > 0 and energy["joules_per_sample"] > 0
    assert 20 < energy["avg_watts_per_device"] < 1500
    ieee = _record(tmp_path / "ieee", [*GPT_TINY, "--precision", "fp32", "--fp32-math", "ieee"])
    assert ieee["tf32"] == {"matmul": False, "conv": False}
    assert ieee["mfu_peak_precision"] == "fp32"


@pytest.mark.parametrize("model", ["resnet50", "gpt"])
def test_amp_fp16_steps_do_not_sync_the_host(model):
    """The loss scaler's inf check stays on the device (fused optimizers), and nothing else in a step waits."""
    from dlperf.engines.base import RankEnv
    from dlperf.engines.torch.engine import TorchEngine
    from dlperf.engines.torch.syncs import host_syncs_per_step
    from dlperf.workloads import check_spec, get_workload, spec_from_mapping

    tiny = (
        {"batch_size": 16, "image_size": 64, "num_classes": 10}
        if model == "resnet50"
        else {"num_layers": 2, "hidden_size": 256, "num_heads": 4, "seq_length": 128, "vocab_size": 1024,
              "micro_batch_size": 4}
    )  # fmt: skip
    spec = spec_from_mapping({"model": model, "device": "cuda", "precision": "amp-fp16", **tiny})
    plan = check_spec(spec)
    engine = TorchEngine()
    engine.setup(spec, RankEnv(0, 1, 0, 1))
    step = get_workload(model).builder("torch")(spec, plan, engine)
    for _ in range(3):
        step.run()
    per_step, first = host_syncs_per_step(step.run, steps=5)
    assert per_step == 0, first


def test_fused_sgd_survives_a_skipped_first_step():
    """fp16's first steps overflow routinely; fused SGD's buffers must come out of a skipped one as zeros."""
    from fused_sgd import check_skipped_step_then_finite

    check_skipped_step_then_finite("cuda")
