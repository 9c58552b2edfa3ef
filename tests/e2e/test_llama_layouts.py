"""Every Llama layout computes what one process computes: 5 steps of the tiny Llama (4 layers, grouped-query
attention), fp32, gloo on the CPU; each launch builds and steps several layouts in the same processes."""

from __future__ import annotations

import pytest
from layouts import launch, losses

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine

pytestmark = pytest.mark.slow

# TP with sequence parallelism and full checkpointing, and the multi-stage pipeline schedules: interleaved 1F1B
# (2 stages per rank), zero-bubble V with full checkpointing (GPipe and 1F1B run through the same Pipeline in the
# GPT's tests, and 1F1B below)
TWO_PROCESS = [
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
