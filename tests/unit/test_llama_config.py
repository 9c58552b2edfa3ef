"""Llama sizes against Meta's published parameter counts, the PaLM FLOPs formula and MFU against torchtitan's
published figures, tokens/s by hand, case names, and the layout refusals made before any process starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from tiny import as_flags, tiny_llama

from dlperf.engines.torch.pipeline import stage_ids, stage_layers
from dlperf.errors import ConfigError
from dlperf.metrics.flops import llm_flops_per_token, mfu
from dlperf.orchestration.evidence_fields import flops_fields
from dlperf.reporting.layouts_table import group_by_case, layouts_table
from dlperf.workloads import check_spec, get_workload, spec_from_mapping
from dlperf.workloads.llama import flops_per_token
from dlperf.workloads.llama.config import parameter_counts

H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("size", "published", "embedding"),
    [  # Hugging Face's counts of Meta's checkpoints; 1B and 3B tie the output, which ours keeps apart (+ V x h)
        ("1b", 1_235_814_400 + 128_256 * 2048, 128_256 * 2048),
        ("3b", 3_212_749_824 + 128_256 * 3072, 128_256 * 3072),
        ("8b", 8_030_261_248, 128_256 * 4096),
        ("70b", 70_553_706_496, 128_256 * 8192),
        ("405b", 405_853_388_800, 128_256 * 16384),
    ],
)
def test_sizes_have_metas_parameter_counts(size, published, embedding):
    config = spec_from_mapping({"model": "llama", "size": size}).workload
    assert parameter_counts(config) == (published, embedding)


def test_flops_per_token_by_hand_and_torchtitans_published_mfu():
    """Llama 3.1 8B at 8192 tokens: 6 x 7,504,924,672 + 12 x 32 x 32 x 128 x 8192. torchtitan's docs/performance.md
    (Table 1: 8 H100s, FSDP, local batch 2, selective AC) reports 5,762 TPS/GPU eager and 6,667 compiled, and "33% to
    39% MFU": the same formula against the H100 SXM's 989.4 dense bf16 TFLOP/s gives those within a point (33.7 and
    39.0), where counting the embedding in N would give 35.6 and 41.1."""
    config = spec_from_mapping({"model": "llama", "size": "8b"}).workload
    per_token = 6 * (8_030_261_248 - 525_336_576) + 12 * 32 * 32 * 128 * 8192
    assert (
        per_token == 57_914_449_920 == flops_per_token(config) == llm_flops_per_token(7_504_924_672, 32, 32, 128, 8192)
    )
    for tps, published in ((5762, 0.33), (6667, 0.39)):
        value, why = mfu(tps * per_token / 1e12, H100, "amp-bf16", None)
        assert why is None and value == pytest.approx(published, abs=0.01)


def test_record_tokens_per_second_and_mfu_by_hand():
    """8 devices, global batch 16 of 8192 tokens, 1.5 iterations/s: 24 samples/s."""
    spec = spec_from_mapping({"model": "llama", "size": "8b", "devices_per_node": 8, "micro_batch_size": 2,
                              "precision": "amp-bf16", "activation_checkpoint": "selective"})  # fmt: skip
    plan = check_spec(spec)
    derived = get_workload("llama").derived_metrics(spec, plan, 24.0)
    assert derived["tokens_per_s"] == 24 * 8192 == 196_608
    assert derived["tokens_per_s_per_device"] == 24_576
    assert derived["flops_per_iteration_formula"] == 57_914_449_920 * 16 * 8192
    fields = flops_fields(spec, 16 / 24.0, H100, derived["flops_per_iteration_formula"], None, "formula")
    assert fields["tflops_per_device"] == pytest.approx(24_576 * 57_914_449_920 / 1e12)  # 1423.3... / 989.4
    assert fields["mfu"] == pytest.approx(24_576 * 57_914_449_920 / 989.4e12)


def test_case_names_read_like_the_peers_tables():
    plan = check_spec(spec_from_mapping({"model": "llama", "size": "8b", "devices_per_node": 8, "tp": 2,
                                         "micro_batch_size": 2, "precision": "amp-bf16",
                                         "activation_checkpoint": "selective", "compile": True}))  # fmt: skip
    assert plan.record_fields["report_case"] == "llama3-8b_fsdp4_tp2_s8192_gbs8"
    assert plan.record_fields["report_group"] == "FSDP+TP"
    assert plan.group == "llama3-8b_fsdp4_tp2_s8192_gbs8_amp-bf16_ac-selective_compile"
    hsdp_pp = check_spec(spec_from_mapping(tiny_llama(num_layers=4, devices_per_node=8, pp=2, dp_replicate=2,
                                                      pp_schedule="zbv", global_batch_size=16)))  # fmt: skip
    assert hsdp_pp.record_fields["report_case"] == "llama3-64x4_pp2_hsdp2x2_s32_gbs16_mbs1"
    assert hsdp_pp.record_fields["report_group"] == "PP+HSDP"
    assert hsdp_pp.record_fields["work"] == "nh4_kv2_ffn128_v512"
    assert hsdp_pp.group.endswith("_fp32_zbv") and hsdp_pp.layout.accumulation_steps == 4


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"cp": 3, "devices_per_node": 3}, "--seq-length 32 is not divisible by 6 (sequence parallelism"),
        ({"float8": True}, "float8 training (--float8) needs a CUDA GPU"),
        ({"tp": 2, "devices_per_node": 2, "num_kv_heads": 1, "num_heads": 4}, "--num-kv-heads 1 is not divisible"),
        ({"devices_per_node": 3, "tp": 2}, "world size 3 (1n3g) is not divisible"),
        ({"pp": 2, "devices_per_node": 2, "pp_schedule": "zbv", "stages_per_rank": 3}, "zbv runs exactly 2"),
        ({"pp": 2, "devices_per_node": 2, "stages_per_rank": 2}, "1f1b runs one stage per rank"),
        ({"pp": 2, "devices_per_node": 2, "pp_schedule": "interleaved-1f1b", "num_layers": 3}, "fewer than the 4"),
        ({"num_heads": 3}, "must be an even head size"),
    ],
)
def test_layouts_that_cannot_run_are_refused_in_one_line(keys, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_spec(spec_from_mapping(tiny_llama(device="cpu", **keys)))


def test_float8_with_tp_plans_where_the_device_may_be_a_gpu():
    """float8 under TP is wired (torchao's float8 TP styles, tests/e2e/test_llama_layouts.py); only a CPU refuses it."""
    plan = check_spec(spec_from_mapping(tiny_llama(float8=True, tp=2, devices_per_node=2, device="auto")))
    assert "_tp2_" in plan.group and "_float8" in plan.group


def test_cli_plans_context_parallel_on_cpu_and_takes_llama_schedules(capsys):
    """Context parallelism plans on a CPU too (the ring runs over the CPU attention kernel); --pp-schedule is one flag
    for GPT and Llama: the Llama-only schedules pass argparse, GPT refuses them."""
    code, out, _ = run_cli(["run", *as_flags(tiny_llama(cp=2, devices_per_node=2, device="cpu")), "--dry-run"], capsys)
    assert code == 0 and "_cp2_" in out
    code, _, err = run_cli(["run", "--model", "gpt", "--pp-schedule", "zbv", "--device", "cpu"], capsys)
    assert_one_line_error(code, err, "--pp-schedule must be one of gpipe, 1f1b, got 'zbv'")


@pytest.mark.parametrize("config", sorted((Path(__file__).parents[2] / "configs" / "llm").glob("llama3_*.yaml")))
def test_llm_configs_plan(config, capsys, tmp_path):
    """Each configs/llm sweep (dlperf's engine, torchtitan, MaxText, Megatron-LM through --command) plans the same
    case name, its commands printed without running."""
    code, out, err = run_cli(["sweep", str(config), "--dry-run", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    assert "llama3-8b_fsdp8_s8192_gbs16_amp-bf16_ac-selective" in out


def test_layouts_table_names_each_models_formula():
    """Llama records share the GPT report's layouts table; its heading and note name both formulas."""
    spec = spec_from_mapping(tiny_llama(devices_per_node=2, tp=2))
    plan = check_spec(spec)
    record = {"model": "llama", "table": plan.table, "group": plan.group, "status": "ok", "world_size": 2,
              "throughput": 10.0, "tokens_per_s": 320.0, **plan.record_fields}  # fmt: skip
    gpt = {"model": "gpt", "table": "layouts", "group": "DP_1x1x1_2_64x2_fp32", "status": "ok", "world_size": 1}
    lines = layouts_table(group_by_case([record, gpt]))
    assert lines[0] == "## GPT, Llama" and "Llama: (6N + 12·L·H·Q·T) per token" in lines[2]
    [row] = [line for line in lines if line.startswith("|") and plan.group in line]
    assert row.startswith(f"| TP | {plan.group} |") and "| 320 |" in row


def test_pipeline_stages_per_rank_follow_each_schedule():
    """Looped schedules hold stages r, r + pp, ...; the V schedule r and 2·pp - 1 - r (the first and last on rank 0);
    layers split contiguously, the first stages taking one more."""
    assert [stage_ids("interleaved-1f1b", r, 4, 2) for r in range(4)] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert [stage_ids("zbv", r, 2, 2) for r in range(2)] == [[0, 3], [1, 2]]
    assert stage_ids("1f1b", 1, 2, 1) == [1]
    assert [list(stage_layers(6, 4, s)) for s in range(4)] == [[0, 1], [2, 3], [4], [5]]
