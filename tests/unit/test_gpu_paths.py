"""The GPU paths' logic, checked on the CPU: which NVML device a CUDA device is, container PIDs, TF32 and the peak
MFU divides by, measured peaks, hooks outside compiled regions, the loss scaler's inf check, one-rank commbench,
and the JAX allocator's settings. What needs a GPU is in tests/e2e/test_cuda.py and benchmarks/gpu_validate.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from dlperf.engines.base import RankEnv
from dlperf.engines.jax.engine import allocator_env, memory_fraction, memory_keys
from dlperf.engines.torch.engine import TorchEngine
from dlperf.engines.torch.own_work import OwnWorkClock
from dlperf.engines.torch.precision import MixedPrecision, keeps_inf_check_on_device
from dlperf.machine.gpus import nvml_handles, others_on_gpus, visible_gpu_ids
from dlperf.metrics.bandwidth import ONE_RANK, Timing, build_commbench_record
from dlperf.metrics.energy import EnergyMeter
from dlperf.metrics.flops import mfu_fields
from dlperf.reporting.commbench_table import commbench_lines
from dlperf.workloads import get_workload, spec_from_mapping


class FakeNvml:
    """NVML with four GPUs in PCI order; device i has UUID GPU-000i-... and has used (i + 1) * 1000 J."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.uuids = [f"GPU-000{i}-aaaa-bbbb" for i in range(4)]

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return 4

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return self.uuids[handle].encode()  # older bindings return bytes

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        raise self.NVMLError(f"no device {uuid}")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return (handle + 1) * 1_000_000  # mJ, constant: the window's energy is 0, the mapping shows in _start


def test_visible_ids_follow_cuda_visible_devices():
    assert visible_gpu_ids(2, environ={}) == [0, 1]
    assert visible_gpu_ids(2, environ={"CUDA_VISIBLE_DEVICES": "3,1"}) == [3, 1]
    assert visible_gpu_ids(1, environ={"CUDA_VISIBLE_DEVICES": "GPU-0002,0"}) == ["GPU-0002"]
    assert visible_gpu_ids(3, environ={"CUDA_VISIBLE_DEVICES": "2,x,1"}) == [2]  # CUDA stops at an invalid entry
    # the framework's own UUIDs win over the variable (they also follow CUDA_DEVICE_ORDER)
    assert visible_gpu_ids(1, ["GPU-0003-aaaa-bbbb"], {"CUDA_VISIBLE_DEVICES": "0"}) == ["GPU-0003-aaaa-bbbb"]


def test_nvml_handles_by_index_and_uuid_prefix():
    nvml = FakeNvml()
    assert nvml_handles(nvml, [3, "GPU-0001", "GPU-0002-aaaa-bbbb"]) == [3, 1, 2]
    with pytest.raises(FakeNvml.NVMLError):
        nvml_handles(nvml, ["GPU-00"])  # ambiguous prefix: NVML's own look-up, and its error


def test_energy_meter_reads_the_visible_devices_not_nvml_0_and_1():
    ids = visible_gpu_ids(2, environ={"CUDA_VISIBLE_DEVICES": "2,3"})
    meter = EnergyMeter("cuda", ids, nvml=FakeNvml())
    meter.start()
    assert meter._start == [3000.0 * 1000, 4000.0 * 1000]  # devices 2 and 3, in mJ
    assert meter.stop().joules == 0.0


def test_gpu_processes_in_a_container_are_not_called_others():
    listed = [{"device": 0, "pid": 81234, "used_mib": 900.0}, {"device": 0, "pid": 81300, "used_mib": 10.0}]
    others, note = others_on_gpus(listed, own={12, 13})  # our PIDs are the container's: none of them is listed
    assert others is None and "PID namespace" in note
    mine = [{"device": 0, "pid": 12, "used_mib": 900.0}, {"device": 0, "pid": 99, "used_mib": 10.0}]
    others, note = others_on_gpus(mine, own={12, 13})
    assert others == [{"device": 0, "pid": 99, "used_mib": 10.0}] and note is None
    assert others_on_gpus([], own={12}) == ([], None)


def test_fp32_mfu_divides_by_the_tf32_peak_when_tf32_ran(tmp_path: Path):
    h100 = "NVIDIA H100 80GB HBM3"
    flops, seconds = 494.7e12, 1.0  # one device doing the TF32 peak's work in a second
    tf32 = mfu_fields(flops, seconds, 1, h100, "fp32", None, tf32=True, peaks_file=None)
    ieee = mfu_fields(flops, seconds, 1, h100, "fp32", None, tf32=False, peaks_file=None)
    assert tf32["mfu"] == pytest.approx(1.0) and tf32["mfu_peak_precision"] == "tf32"
    assert tf32["mfu_peak_tflops"] == 494.7
    assert ieee["mfu"] == pytest.approx(494.7 / 66.9) and ieee["mfu_peak_precision"] == "fp32"
    bf16 = mfu_fields(flops, seconds, 1, h100, "amp-bf16", None, tf32=True, peaks_file=None)
    assert bf16["mfu_peak_precision"] == "bf16"  # TF32 concerns fp32 runs only
    spec = spec_from_mapping({"model": "resnet50"})
    assert spec.fp32_math == "tf32" and spec.tf32("cuda") and not spec.tf32("cpu")
    assert not spec.replace(fp32_math="ieee").tf32("cuda")


def test_measured_peak_gives_mfu_measured_beside_the_datasheet(tmp_path: Path):
    peaks = tmp_path / "peaks.json"
    name = "NVIDIA H100 80GB HBM3"
    peaks.write_text(json.dumps({"schema": "dlperf.peak/1", "devices": {name: {"bf16": {"tflops": 700.0}}}}))
    fields = mfu_fields(350e12, 1.0, 1, name, "amp-bf16", None, peaks_file=peaks)
    assert fields["mfu_measured"] == pytest.approx(0.5) and fields["mfu_measured_peak_tflops"] == 700.0
    assert fields["mfu_measured_peak_source"].startswith("measured by `dlperf peak`")
    assert fields["mfu"] == pytest.approx(350 / 989.4)  # the datasheet MFU stays
    other = mfu_fields(350e12, 1.0, 1, name, "fp32", None, tf32=True, peaks_file=peaks)
    assert other["mfu_measured"] is None and other["mfu_measured_peak_tflops"] is None  # no tf32 measured


def _build(mapping: dict):
    spec = spec_from_mapping({"device": "cpu", **mapping})
    workload = get_workload(spec.model)
    plan = workload.plan(spec)
    engine = TorchEngine()
    engine.rank = RankEnv(0, 1, 0, 1)
    return workload.builder("torch")(spec, plan, engine)


def test_resnet_compile_keeps_clock_hooks_out_of_the_compiled_model():
    tiny = {"model": "resnet50", "batch_size": 2, "image_size": 32, "num_classes": 10}
    eager = _build(tiny)
    assert eager.own_clock is not None and eager.own_measure != "step"
    compiled = _build({**tiny, "compile": True})  # torch.compile is lazy: building compiles nothing
    assert compiled.own_clock is None and compiled.own_measure == "step"


def test_gpt_compile_compiles_blocks_and_keeps_the_hooks_on_the_eager_model(monkeypatch: pytest.MonkeyPatch):
    from dlperf.workloads.gpt import torch_step as gpt_step

    hooked = []

    def clock(module, param, device, rank):
        hooked.append(module)
        return OwnWorkClock(module, param, device, rank)

    monkeypatch.setattr(gpt_step, "OwnWorkClock", clock)
    step = _build({"model": "gpt", "num_layers": 2, "hidden_size": 64, "num_heads": 2, "seq_length": 16,
                   "vocab_size": 256, "micro_batch_size": 2, "compile": True})  # fmt: skip
    (model,) = hooked
    assert step.own_clock is not None and step.own_measure != "step"
    assert getattr(model, "_compiled_call_impl", None) is None  # the hooked module runs eagerly ...
    assert all(block._compiled_call_impl is not None for block in model.layers.values())  # ... its blocks compiled


def test_fused_optimizers_keep_the_inf_check_on_the_device():
    params = [torch.nn.Parameter(torch.ones(3))]
    assert keeps_inf_check_on_device(torch.optim.SGD(params, lr=0.1, fused=True))
    assert keeps_inf_check_on_device(torch.optim.AdamW(params, fused=True))
    assert not keeps_inf_check_on_device(torch.optim.SGD(params, lr=0.1, foreach=True))  # GradScaler: .item()


def _sharded_scaler_rank(rank: int, world: int, init: str, out: str) -> None:
    """Each way of stepping (the explicit unscale_, then without it), one after the other in the same ranks."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    for explicit in (True, False):
        weight = torch.nn.Parameter(torch.ones(4))
        optimizer = torch.optim.AdamW([weight], lr=0.1, fused=True)  # fused: the scaler hands it found_inf
        amp = MixedPrecision("fp32", torch.device("cpu"))
        amp.scaler = torch.amp.GradScaler("cpu")
        amp.shard()
        amp.sharded = explicit  # False: the fused path without the explicit unscale_ (the bug this guards)
        inputs = torch.full((4,), float("inf") if rank == 0 else 1.0)  # only rank 0's gradient overflows
        amp.backward((weight * inputs).sum())
        amp.step(optimizer)
        with open(f"{out}.{explicit}.{rank}", "w") as f:
            f.write(json.dumps(weight.detach().tolist()))
    dist.destroy_process_group()


@pytest.mark.slow
def test_sharded_scaler_makes_every_rank_skip_the_same_step(tmp_path: Path):
    import torch.multiprocessing as mp

    init = f"file://{tmp_path / 'rendezvous'}"
    out = str(tmp_path / "weights")
    mp.spawn(_sharded_scaler_rank, args=(2, init, out), nprocs=2)

    def skipped(explicit: bool) -> list[bool]:
        return [json.loads(Path(f"{out}.{explicit}.{rank}").read_text()) == [1.0] * 4 for rank in range(2)]

    assert skipped(True) == [True, True]  # one verdict: both ranks skip
    assert skipped(False) == [True, False]  # each rank its own verdict: the ranks diverge


def test_one_rank_commbench_reports_no_bandwidth():
    timings = [Timing("all_reduce", size, 1, 1e-6 + size * 1e-10) for size in (1024, 1 << 20)]
    one = build_commbench_record(timings, nodes=1, devices_per_node=1, backend="nccl", device_type="cuda",
                                 dtype="fp32")  # fmt: skip
    assert all(r["busbw_gbps"] is None and r["algbw_gbps"] is None for r in one["results"])
    assert one["fits"]["all_reduce"]["busbw_gbps"] is None and one["note"] == ONE_RANK
    text = "\n".join(commbench_lines([{**one, "status": "ok", "case": "1n1g"}]))
    assert "n/a" in text and ONE_RANK in text
    two = build_commbench_record([Timing(t.op, t.size_bytes, 2, t.seconds) for t in timings], nodes=1,
                                 devices_per_node=2, backend="nccl", device_type="cuda", dtype="fp32")  # fmt: skip
    assert two["results"][1]["busbw_gbps"] == pytest.approx((1 << 20) / timings[1].seconds / 1e9)
    assert two["note"] is None


def test_jax_allocator_settings():
    one = allocator_env({"CUDA_VISIBLE_DEVICES": "3,1"}, 1, "cuda", None)
    assert one == {
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "XLA_CLIENT_MEM_FRACTION": "0.95",  # XLA's 75 % default caps even an unpreallocated pool
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95",
        "CUDA_VISIBLE_DEVICES": "3",
    }
    assert allocator_env({"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, 1, "cuda", None)["XLA_CLIENT_MEM_FRACTION"] == ".5"
    assert allocator_env({}, 1, "cuda", None)["CUDA_VISIBLE_DEVICES"] == "0"
    assert (
        allocator_env({"XLA_PYTHON_CLIENT_PREALLOCATE": "true"}, 1, "cuda", None)["XLA_PYTHON_CLIENT_PREALLOCATE"]
        == "true"
    )  # the user's choice stays
    many = allocator_env({}, 4, "cuda", memory_fraction(20 * 2**30, 80 * 2**30))
    assert "CUDA_VISIBLE_DEVICES" not in many  # jax.distributed gives each process its local rank's GPU
    assert many["XLA_CLIENT_MEM_FRACTION"] == many["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.2500"
    assert allocator_env({}, 1, "cpu", None) == {}


def test_jax_memory_uses_the_torch_keys():
    mib = 2**20
    stats = {"peak_bytes_in_use": 300 * mib, "bytes_limit": 1000 * mib, "peak_pool_bytes": 400 * mib}
    assert memory_keys(stats) == {"allocated": 300.0, "reserved": 400.0}
    assert memory_keys({"peak_bytes_in_use": 300 * mib, "bytes_limit": 1000 * mib})["reserved"] == 1000.0
    assert memory_keys({}) is None and memory_keys(None) is None


def test_cpu_memory_cap_is_an_address_space_limit(tmp_path: Path):
    """The engine applies maxbatch's cap: RLIMIT_AS on the CPU (in a child, which keeps the limit to itself)."""
    import subprocess
    import sys

    code = (
        "import resource, torch; from dlperf.engines.torch.engine import apply_memory_cap; "
        "apply_memory_cap(torch.device('cpu'), 8 * 2**30); print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, check=True)
    assert int(out.stdout) == 8 * 2**30


def test_maxbatch_hands_the_cap_to_the_ranks_not_an_address_space_limit(tmp_path: Path):
    """The probe's processes start uncapped (CUDA's start-up maps far more than it uses) and carry the cap for the
    engine to apply to its device."""
    import sys

    from dlperf.maxbatch.probe import RunProbe

    code = (
        "import os, resource; print(os.environ['DLPERF_MEMORY_CAP_BYTES'], resource.getrlimit(resource.RLIMIT_AS)[0])"
    )
    probe = RunProbe(lambda batch, out: [sys.executable, "-c", code], tmp_path, memory_cap_bytes=3 * 2**30)
    assert probe(8).status == "error"  # no record: not a run
    cap, limit = (tmp_path / "b8" / "probe.console.txt").read_text().split()
    assert int(cap) == 3 * 2**30 and int(limit) == -1  # RLIM_INFINITY


def test_reserved_peak_starts_from_a_released_cache(monkeypatch):
    """reset_peak_memory_stats sets the reserved peak to what the allocator holds: the warm-up's cached workspaces
    are released first, or the timed steps' reserved peak is the warm-up's (and maxbatch sizes from it)."""
    from dlperf.engines.torch import memory

    calls = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: calls.append(f"reset {device}"))
    memory.reset_peak(torch.device("cuda", 1))
    assert calls == ["empty_cache", "reset cuda:1"]
    memory.reset_peak(torch.device("cpu"))  # the process's RSS peak: nothing to reset
    assert calls == ["empty_cache", "reset cuda:1"]
