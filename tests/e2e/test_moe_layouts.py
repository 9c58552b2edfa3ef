"""Expert parallelism computes what one process computes: 3 steps (2 AdamW updates) of the tiny MoE (4 blocks, the
first dense; 4 experts of which 2 per token, one shared; MLA), fp32, gloo on the CPU, tokens exchanged by
all_to_all_single with uneven splits. Each launch computes the one-process reference on its rank 0 first, then
builds and steps the layouts in the same processes (tests/helpers/layouts.py)."""

from __future__ import annotations

import pytest
from layouts import ONE_PROCESS, launch

pytestmark = pytest.mark.slow

STEPS = 3
AUX = {"load_balance": "aux"}
BALANCED = {"routing": "balanced"}
DROPPING = {"capacity_factor": 1.0}
# EP 2 (each rank 2 experts), the auxiliary loss under EP 2 (its gradient per micro-batch, as one process's), CP 2 x
# EP 2 (the ring over MLA's padded values; EP folded inside dp_shard x cp), TP 2 (MLA's heads split, the MoE whole)
TWO_PROCESS = [{"ep": 2}, {"ep": 2, **AUX}, {"cp": 2, "ep": 2}, {"tp": 2}]
# EP 2 x FSDP 2 (experts sharded over ep and over the rest), HSDP 2 x EP 2, EP 4 (one expert a rank), balanced
# routing and a capacity factor that drops, under EP 2 x FSDP 2; FSDP 2 x CP 2 with EP 4 over both; PP 2 (1F1B) x
# EP 2, with the auxiliary loss too (the pipeline scales its gradient by 1 / micro-batches itself); TP 2 x EP 2, with
# MLA's low-rank query too (its wq_a and q_norm replicated over tp)
FOUR_PROCESS = [{"ep": 2}, {"ep": 2, "dp_replicate": 2}, {"ep": 4}, {"ep": 2, **BALANCED}, {"ep": 2, **DROPPING},
                {"cp": 2, "ep": 4}, {"pp": 2, "ep": 2}, {"pp": 2, "ep": 2, **AUX}, {"tp": 2, "ep": 2},
                {"tp": 2, "ep": 2, "q_lora_rank": 16}]  # fmt: skip
LAYOUT_KEYS = ("ep", "dp_replicate", "cp", "pp", "tp")


def routing(layout: dict) -> dict:
    """A layout's keys that change what one process computes too."""
    return {key: value for key, value in layout.items() if key not in LAYOUT_KEYS}


def routings(layouts: list[dict]) -> list[dict]:
    """Each routing of the layouts once, in order."""
    found: list[dict] = []
    for layout in layouts:
        if routing(layout) not in found:
            found.append(routing(layout))
    return found


def references(layouts: list[dict]) -> list[dict]:
    """The one-process reference of each routing."""
    return [{**ONE_PROCESS, **one} for one in routings(layouts)]


def check(layouts: list[dict], got: list[list[float]]) -> None:
    known = routings(layouts)
    singles, parallel = got[: len(known)], got[len(known) :]
    for layout, losses in zip(layouts, parallel, strict=True):
        single = singles[known.index(routing(layout))]
        assert len(single) == STEPS and single[0] > single[-1] + 0.2, f"{layout} trains"
        assert losses == pytest.approx(single, rel=1e-5), f"layout {layout}"


def test_two_process_expert_parallelism_matches_one_process(tmp_path):
    check(TWO_PROCESS, launch(tmp_path, 2, "moe", [*references(TWO_PROCESS), *TWO_PROCESS], STEPS))


def test_four_process_expert_parallelism_matches_one_process(tmp_path):
    check(FOUR_PROCESS, launch(tmp_path, 4, "moe", [*references(FOUR_PROCESS), *FOUR_PROCESS], STEPS))
