"""Every named MoE size has its model card's parameter counts, total and active.

How a count is defined: `total` is every parameter the workload builds (embedding, blocks, final norm, untied output
layer; no multi-token-prediction module: DeepSeek-V3's 671B leaves it out too). `active` counts the routed experts
top_k times instead of num_experts; Qwen3 and Mistral count the input embedding's table in it, OpenAI (gpt-oss),
DeepSeek and Moonshot (Kimi K2) do not (a lookup, no multiply): each size says which. A card's figure is met within
one unit of its last stated digit (30.5B: 0.1B; 671B: 1B, 0.15 %).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli

from dlperf.workloads.moe.config import SIZES, MoEConfig, parameter_counts

# size -> (card's total, card's active, whether that active counts the input embedding); sources: each model card
# on the Hugging Face hub (Qwen3-30B-A3B: "30.5B in total and 3.3B activated"; DeepSeek-V3: "671B total parameters
# with 37B activated"; Mixtral: 46.7B / 12.9B and 141B / 39B; gpt-oss: 21B / 3.6B and 117B / 5.1B; Kimi K2's card
# table: 1T / 32B; its technical report's 1.04T is 1.3 % above the built shape's 1.026T, not matched here)
CARDS = {
    "qwen3-30b-a3b": ("30.5B", "3.3B", True),
    "qwen3-235b-a22b": ("235B", "22B", True),
    "deepseek-v3": ("671B", "37B", False),
    "mixtral-8x7b": ("46.7B", "12.9B", True),
    "mixtral-8x22b": ("141B", "39B", True),
    "gpt-oss-20b": ("21B", "3.6B", False),
    "gpt-oss-120b": ("117B", "5.1B", False),
    "kimi-k2": ("1T", "32B", False),
}


def sized(size: str) -> MoEConfig:
    return replace(MoEConfig(), size=size, **SIZES[size])


def within_card(count: int, card: str) -> bool:
    """`count` (parameters) within one unit of the last digit of `card`, as the card writes it (`30.5B`, `1T`)."""
    figure, scale = float(card[:-1]), {"B": 1e9, "T": 1e12}[card[-1]]
    unit = 10.0 ** -len(card[:-1].partition(".")[2])
    return abs(count / scale - figure) <= unit + 1e-9


@pytest.mark.parametrize("size", sorted(CARDS))
def test_named_sizes_have_their_cards_counts(size: str) -> None:
    card_total, card_active, embedding_active = CARDS[size]
    counts = parameter_counts(sized(size))
    active = counts.active if embedding_active else counts.active - counts.embedding
    assert within_card(counts.total, card_total), (size, counts.total)
    assert within_card(active, card_active), (size, active)


def test_every_size_is_checked_and_debug_is_torchtitans() -> None:
    """The debug model has no card: its counts are pinned (torchtitan's deepseek_v3 debugmodel shape)."""
    assert set(SIZES) == {*CARDS, "debug"}
    counts = parameter_counts(sized("debug"))
    assert (counts.total, counts.active) == (33_014_016, 28_098_816)


def test_the_debug_sweep_plans_its_cases(capsys, tmp_path):
    """configs/llm/moe_debug.yaml plans the learned and balanced routers, in one process and under EP 2."""
    config = Path(__file__).parents[2] / "configs" / "llm" / "moe_debug.yaml"
    code, out, err = run_cli(["sweep", str(config), "--dry-run", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    for case in ("debug_single_bias_s256_gbs2", "debug_single_balanced_s256_gbs2", "debug_fsdp2_ep2_bias_s256_gbs2"):
        assert f"{case}_fp32" in out


def test_the_layouts_table_shows_each_moe_cases_measured_imbalance_beside_its_routing():
    """A MoE case's row carries the median of its repeats' measured imbalance and the routing that gave it (the
    figure force-balanced tables hide); a section without MoE runs keeps the dense table's columns."""
    from tiny import tiny_moe

    from dlperf.reporting.layouts_table import group_by_case, layouts_table
    from dlperf.workloads import check_spec, spec_from_mapping

    rows = {}
    for routing, imbalances in (("learned", [2.4, 2.6, 2.5]), ("balanced", [1.0, 1.0])):
        spec = spec_from_mapping(tiny_moe(devices_per_node=2, ep=2, routing=routing))
        plan = check_spec(spec)
        rows[routing] = [
            {"model": "moe", "table": plan.table, "group": plan.group, "status": "ok", "world_size": 2,
             "throughput": 10.0, "moe": {"routing": routing, "imbalance": value}, **plan.record_fields}
            for value in imbalances
        ]  # fmt: skip
    lines = layouts_table(group_by_case(rows["learned"] + rows["balanced"]))
    assert "| expert imbalance (routing) |" in next(line for line in lines if line.startswith("| group"))
    assert any("| 2.50 (learned) |" in line for line in lines) and any("| 1.00 (balanced) |" in line for line in lines)
    dense = {"model": "gpt", "table": "layouts", "group": "DP_1x1x1_2_64x2_fp32", "status": "ok", "world_size": 1}
    assert "imbalance" not in "\n".join(layouts_table(group_by_case([dense])))
