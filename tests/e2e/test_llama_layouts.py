"""Every Llama layout computes what one process computes: 3 steps (2 AdamW updates) of the tiny Llama (4 layers,
grouped-query attention), fp32, gloo on the CPU; each launch computes the one-process reference on its rank 0 first,
then builds and steps several layouts in the same processes."""

from __future__ import annotations

import pytest
from layouts import FLOAT8, ONE_PROCESS, launch

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


# torchao's float8 (tests/helpers/layouts.py says how it runs on the CPU) in one process, under TP 2 and FSDP 2
FLOAT8_LAYOUTS = [{**ONE_PROCESS, **FLOAT8}, {**FLOAT8, "tp": 2}, FLOAT8]


@pytest.fixture(scope="module")
def two_process(tmp_path_factory) -> list[list[float]]:
    """The one-process reference, TWO_PROCESS and FLOAT8_LAYOUTS in one launch of 2 processes (one start-up)."""
    return launch(tmp_path_factory.mktemp("two"), 2, "llama", [ONE_PROCESS, *TWO_PROCESS, *FLOAT8_LAYOUTS], STEPS)


def check_layouts(single: list[float], layouts: list[dict], got: list[list[float]]) -> None:
    assert len(single) == STEPS and single[0] > single[-1] + 0.2  # it trains
    for layout, losses in zip(layouts, got, strict=True):
        assert losses == pytest.approx(single, rel=1e-5), f"layout {layout}"


def test_two_process_layouts_match_single_process(two_process):
    check_layouts(two_process[0], TWO_PROCESS, two_process[1 : 1 + len(TWO_PROCESS)])


def test_four_process_layouts_match_single_process(tmp_path):
    single, *parallel = launch(tmp_path, 4, "llama", [ONE_PROCESS, *FOUR_PROCESS], steps=STEPS)
    check_layouts(single, FOUR_PROCESS, parallel)


def test_float8_layouts_match_float8_in_one_process(two_process):
    """FSDP 2, whose all-gathers carry the weights cast with the whole weight's scale, gives the one-process float8
    losses (an activation's scale is its micro-batch's, and each rank's micro-batches are rows the one process runs
    as micro-batches too: a rank holding part of one, as under CP, would cast with scales of its own). TP 2 casts
    with the same tensor-wide scales (an amax over a DTensor's slices is all-reduced), but its row-wise products are
    summed in another order (two partial sums, then the reduce-scatter), and the few fp32 values this moves across
    a float8 rounding boundary (e4m3 keeps 3 bits of mantissa) move the loss by up to ~7e-5 of itself here: within
    2e-4, and closer to the one-process float8 losses than to fp32's at every step (float8 moves them by up to
    ~3e-4)."""
    fp32, (float8, tp, fsdp) = two_process[0], two_process[-len(FLOAT8_LAYOUTS) :]
    assert fsdp == pytest.approx(float8, rel=1e-6)
    assert tp == pytest.approx(float8, rel=2e-4)
    for got, want, other in zip(tp, float8, fp32, strict=True):
        assert abs(got - want) < abs(got - other)
