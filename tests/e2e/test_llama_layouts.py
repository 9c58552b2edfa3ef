"""Every Llama and GPT layout computes what one process computes: 3 steps (2 AdamW updates) of the tiny Llama (4
layers, grouped-query attention) and 5 of the tiny GPT, fp32, gloo on the CPU; each launch computes each model's
one-process reference on its rank 0 first, then builds and steps several layouts of both models in the same
processes (one start-up of 2 processes and one of 4 for both models' layouts). The GPT's pipeline run through the CLI
is test_gpt_layouts.py's."""

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

# the GPT's 5 steps: DP=2 ({}), TP, and the single-stage pipeline schedules on 2 processes; DP2xTP2, TP2xPP2, DP2xPP2
# with DDP and with FSDP2 on 4, their meshes built one after another
GPT_STEPS = 5
GPT_TWO_PROCESS = [{}, {"tp": 2}, {"pp": 2, "pp_schedule": "gpipe"}, {"pp": 2, "pp_schedule": "1f1b"}]
GPT_FOUR_PROCESS = [{"tp": 2}, {"tp": 2, "pp": 2}, {"pp": 2}, {"pp": 2, "dp_mode": "fsdp"}]


def gpt(layouts: list[dict]) -> list[dict]:
    """The GPT's one-process reference and `layouts`, for a launch of the Llama's."""
    return [{"model": "gpt", "steps": GPT_STEPS, **layout} for layout in [ONE_PROCESS, *layouts]]


def both(nproc: int, llama: list[dict], gpt_layouts: list[dict], after: list[dict], tmp_path) -> tuple[list, list]:
    """One launch of `nproc` processes: the Llama's reference and `llama`, the GPT's reference and `gpt_layouts`,
    then `after` (float8: its layouts move float8 gathers as bytes from the first on); the Llama's part and the
    GPT's (each its reference first), and the Llama's `after` part at the end of the first."""
    got = launch(tmp_path, nproc, "llama", [ONE_PROCESS, *llama, *gpt(gpt_layouts), *after], STEPS)
    split = 1 + len(llama)
    return got[:split] + got[split + 1 + len(gpt_layouts) :], got[split : split + 1 + len(gpt_layouts)]


@pytest.fixture(scope="module")
def two_process(tmp_path_factory) -> tuple[list[list[float]], list[list[float]]]:
    """The Llama's reference, TWO_PROCESS and FLOAT8_LAYOUTS, and the GPT's reference and GPT_TWO_PROCESS, in one
    launch of 2 processes (one start-up)."""
    return both(2, TWO_PROCESS, GPT_TWO_PROCESS, FLOAT8_LAYOUTS, tmp_path_factory.mktemp("two"))


@pytest.fixture(scope="module")
def four_process(tmp_path_factory) -> tuple[list[list[float]], list[list[float]]]:
    return both(4, FOUR_PROCESS, GPT_FOUR_PROCESS, [], tmp_path_factory.mktemp("four"))


def check_layouts(single: list[float], layouts: list[dict], got: list[list[float]]) -> None:
    assert len(single) == STEPS and single[0] > single[-1] + 0.2  # it trains
    for layout, losses in zip(layouts, got, strict=True):
        assert losses == pytest.approx(single, rel=1e-5), f"layout {layout}"


def test_two_process_layouts_match_single_process(two_process):
    llama, _ = two_process
    check_layouts(llama[0], TWO_PROCESS, llama[1 : 1 + len(TWO_PROCESS)])


def test_four_process_layouts_match_single_process(four_process):
    (single, *parallel), _ = four_process
    check_layouts(single, FOUR_PROCESS, parallel)


@pytest.mark.parametrize(("nproc", "layouts"), [(2, GPT_TWO_PROCESS), (4, GPT_FOUR_PROCESS)])
def test_gpt_layouts_match_single_process(request, nproc, layouts):
    _, (single, *parallel) = request.getfixturevalue("two_process" if nproc == 2 else "four_process")
    assert len(single) == GPT_STEPS and single[0] > single[-1]  # it trains
    for layout, got in zip(layouts, parallel, strict=True):
        assert got == pytest.approx(single, rel=1e-4), f"layout {layout} on {nproc} processes"


def test_float8_layouts_match_float8_in_one_process(two_process):
    """FSDP 2, whose all-gathers carry the weights cast with the whole weight's scale, gives the one-process float8
    losses (an activation's scale is its micro-batch's, and each rank's micro-batches are rows the one process runs
    as micro-batches too: a rank holding part of one, as under CP, would cast with scales of its own). TP 2 casts
    with the same tensor-wide scales (an amax over a DTensor's slices is all-reduced), but its row-wise products are
    summed in another order (two partial sums, then the reduce-scatter), and the few fp32 values this moves across
    a float8 rounding boundary (e4m3 keeps 3 bits of mantissa) move the loss by up to ~7e-5 of itself here: within
    2e-4, and closer to the one-process float8 losses than to fp32's at every step (float8 moves them by up to
    ~3e-4)."""
    llama, _ = two_process
    fp32, (float8, tp, fsdp) = llama[0], llama[-len(FLOAT8_LAYOUTS) :]
    assert fsdp == pytest.approx(float8, rel=1e-6)
    assert tp == pytest.approx(float8, rel=2e-4)
    for got, want, other in zip(tp, float8, fp32, strict=True):
        assert abs(got - want) < abs(got - other)
