"""Every Llama layout computes what one process computes: 3 steps (2 AdamW updates) of the tiny Llama (4 layers,
grouped-query attention), fp32, gloo on the CPU; each launch computes the one-process reference on its rank 0 first,
then builds and steps several layouts in the same processes."""

from __future__ import annotations

import pytest
from layouts import ONE_PROCESS, launch

pytestmark = pytest.mark.slow

STEPS = 3
# TP with sequence parallelism and full checkpointing, context parallelism (torch's ring over the CPU attention
# kernel) with selective checkpointing, and the multi-stage pipeline schedules: interleaved 1F1B (2 stages per
# rank), zero-bubble V with full checkpointing (GPipe and 1F1B run through the same Pipeline in the GPT's tests,
# and 1F1B below)
TWO_PROCESS = [
    {"tp": 2, "activation_checkpoint": "full"},
    {"cp": 2, "activation_checkpoint": "selective"},
    {"pp": 2, "pp_schedule": "interleaved-1f1b"},
    {"pp": 2, "pp_schedule": "zbv", "activation_checkpoint": "full"},
]
# HSDP 2x2, FSDP x TP, FSDP x CP (parameters sharded over all four), CP x TP, PP (1F1B) x FSDP with selective
# checkpointing, TP x PP interleaved zero bubble
FOUR_PROCESS = [
    {"dp_replicate": 2},
    {"tp": 2},
    {"cp": 2},
    {"cp": 2, "tp": 2},
    {"pp": 2, "activation_checkpoint": "selective"},
    {"tp": 2, "pp": 2, "pp_schedule": "interleaved-zb"},
]


@pytest.mark.parametrize(("nproc", "layouts"), [(2, TWO_PROCESS), (4, FOUR_PROCESS)])
def test_layouts_match_single_process(tmp_path, nproc, layouts):
    single, *parallel = launch(tmp_path, nproc, "llama", [ONE_PROCESS, *layouts], steps=STEPS)
    assert len(single) == STEPS and single[0] > single[-1] + 0.2  # it trains
    for layout, got in zip(layouts, parallel, strict=True):
        assert got == pytest.approx(single, rel=1e-5), f"layout {layout} on {nproc} processes"
