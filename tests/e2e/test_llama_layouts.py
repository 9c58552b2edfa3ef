"""Every Llama layout computes what one process computes: 5 steps of the tiny Llama (4 layers, grouped-query
attention), fp32, gloo on the CPU; each launch builds and steps several layouts in the same processes."""

from __future__ import annotations

import json

import pytest
from layouts import launch, losses
from tiny import QUICK_RUN, as_flags, tiny_llama

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine

pytestmark = pytest.mark.slow

# HSDP without sharding (dp_replicate 2), TP with sequence parallelism and full checkpointing, and the
# multi-stage pipeline schedules: interleaved 1F1B (2 stages per rank), zero-bubble V with full checkpointing
# (GPipe and 1F1B run through the same Pipeline in the GPT's tests, and 1F1B below)
TWO_PROCESS = [
    {"dp_replicate": 2},
    {"tp": 2, "activation_checkpoint": "full"},
    {"pp": 2, "pp_schedule": "interleaved-1f1b"},
    {"pp": 2, "pp_schedule": "zbv", "activation_checkpoint": "full"},
]
# HSDP 2x2, FSDP x TP, PP (1F1B) x FSDP with selective checkpointing, TP x PP interleaved zero bubble
FOUR_PROCESS = [
    {"dp_replicate": 2},
    {"tp": 2},
    {"pp": 2, "activation_checkpoint": "selective"},
    {"tp": 2, "pp": 2, "pp_schedule": "interleaved-zb"},
]


@pytest.fixture(scope="module")
def single_process() -> list[float]:
    engine = TorchEngine()
    engine.rank = RankEnv(rank=0, world_size=1, local_rank=0, local_world_size=1)
    return losses("llama", {}, engine)


@pytest.mark.parametrize(("nproc", "layouts"), [(2, TWO_PROCESS), (4, FOUR_PROCESS)])
def test_layouts_match_single_process(tmp_path, single_process, nproc, layouts):
    assert len(single_process) == 5 and single_process[0] > single_process[-1] + 0.3  # it trains
    for layout, got in zip(layouts, launch(tmp_path, nproc, "llama", layouts)):
        assert got == pytest.approx(single_process, rel=1e-5), f"layout {layout} on {nproc} processes"


def test_run_records_tokens_and_formula(tmp_path):
    """Through the CLI, one process with selective checkpointing and 2 accumulated micro-batches: the record names the
    case as the peers do and carries tokens/s and the PaLM formula's FLOPs (MFU stays empty on a CPU, with the
    reason)."""
    from conftest import run_dlperf

    keys = tiny_llama(global_batch_size=4, micro_batch_size=2, activation_checkpoint="selective", **QUICK_RUN)
    done = run_dlperf(["run", *as_flags(keys), "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    [path] = (tmp_path / "llama" / "1n1g").glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and 5.5 < record["loss_first"] < 7.0
    assert (
        record["group"] == "llama3-64x2_single_s32_gbs4_mbs2_fp32_ac-selective" and record["report_group"] == "single"
    )
    assert path.name.startswith(record["group"] + "_nh4_kv2_ffn128_v512")
    assert record["parallel"]["accumulation_steps"] == 2 and record["global_batch_size"] == 4
    non_embedding = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64 + 512 * 64
    assert record["flops_per_token"] == 6 * non_embedding + 12 * 2 * 4 * 16 * 32
    assert record["flops_per_iteration"] == record["flops_per_token"] * 4 * 32
    assert record["tokens_per_s"] == pytest.approx(record["throughput"] * 32)
    assert record["tokens_per_s_per_device"] == record["tokens_per_s"]
    assert record["mfu"] is None and "pass --peak-tflops" in record["mfu_note"]
    assert record["peak_memory_mib"]
