"""The MoE prediction model's parts against figures computed by hand, and against the published points it holds out.

DeepSeek-V3 by hand: hidden 7168, 256 routed experts of SwiGLU 2048 (3 x 7168 x 2048 = 44,040,192 parameters each),
top 8. One dispatch sends a token's 8 copies of 7168 16-bit values (114,688 bytes) spread evenly over the ep ranks:
at ep 64 on 8-GPU nodes 7/64 of them over NVLink (12,544 bytes) and 56/64 over InfiniBand (100,352); in a 64-GPU
NVLink domain 63/64 over NVLink (112,896) and none over InfiniBand. A stage of 16 MoE blocks at ep 64 holds 4
experts per block: 16 x 4 x 44,040,192 = 2,818,572,288 parameters, whose 16 bytes of state each (fp32 value,
gradient, two AdamW moments) shard over edp 4: 11,274,289,152 bytes. Its active FLOPs per token: 6 x (37,552,282,624
active - 926,679,040 embedding) = 219,753,621,504 for the matmuls, plus MLA's scores 12 x 61 blocks x 128 heads x
(192 + 128) / 2 x 4096 = 61,404,610,560 (PaLM's count), half of that causal.

The all-to-all on one 8-GPU node at 360 GB/s and 10 us a message, ep 8, one micro-batch of 4096 tokens: a dispatch
sends 4096 x 114,688 x 7/8 = 411,041,792 bytes over NVLink, its 7 messages posted together: 1.141783 ms + 10 us =
1.151783 ms; dispatch and combine forward and backward on the 58 MoE blocks: 4 x 58 x 1.151783 ms = 0.267214 s.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import assert_one_line_error, run_cli

from dlperf.errors import ConfigError
from dlperf.predict.calibration import setting_for
from dlperf.predict.model import Link
from dlperf.predict.setting import Device, Network, Training
from dlperf.workloads import predictors
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.llama.predict import median_abs_error
from dlperf.workloads.llama.predict_model import _activations_per_token, predict_llama
from dlperf.workloads.moe import predict as moe_predict
from dlperf.workloads.moe.predict_model import (
    Experts,
    a2a_bytes_per_token,
    expert_params_per_rank,
    expert_state_bytes,
    kept_bytes_per_pair,
    mla_kept,
    moe_shape,
    predict_moe,
)

DSV3 = moe_shape(moe_predict.moe_config({"size": "deepseek-v3"}))
H100 = setting_for("H100 SXM", 8, "amp-bf16", "megatron", Training(loss_parallel=True))


def test_all_to_all_bytes_per_token_on_each_link():
    assert a2a_bytes_per_token(DSV3, 64, 8, 2) == (12544, 100352)
    assert a2a_bytes_per_token(DSV3, 64, 64, 2) == (112896, 0)
    assert a2a_bytes_per_token(DSV3, 1, 8, 2) == (0, 0)
    assert a2a_bytes_per_token(DSV3, 64, 8, 4) == (25088, 200704)  # an fp32 run sends fp32 rows


def test_fsdp2s_expert_copies_and_dlperfs_unsplit_shared_experts_by_hand():
    """The debug size in fp32 (5 MoE blocks of 8 experts, 3 x 256 x 256 = 196,608 parameters each; 2 shared) at
    1 GB/s, the links free. EP 2 on 2 ranks: FSDP2 holds each rank's 5 x 4 experts (L = 3,932,160 parameters) on
    one rank, each gather and reduction copying the shard in and the whole out (2 x (L + L) values of 4 bytes):
    3 x 16 L / 1e9 = 0.18874368 s, 2 gathers and a reduction. TP 2 x EP 2 on 4 ranks (dp_shard 2): dlperf runs the
    2 shared experts of each block whole on each tp rank (S = 5 x 2 x 196,608 = 1,966,080) sharded over dp_shard 2,
    beside the dense part: 3 x 4 x 2 x (S / 2 + S) / 1e9 = 0.07077888 s more, AdamW's 28 bytes of their half
    14 S / 1e9 = 0.02752512 s."""
    shape = moe_shape(moe_predict.moe_config({"size": "debug", "attention": "gqa", "num_kv_heads": 4}))
    device = Device(peak_tflops=1.0, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=1e9)
    training = Training(precision="fp32", overlap=False, fused_optimizer=False)
    free = Network(4, Link(0.0, 0.0), Link(0.0, 0.0))
    for tp, dense_shape, want in ((1, shape.dense, 0.18874368), (2, shape.without_shared(), 0.18874368 + 0.07077888)):
        layout = LlamaLayout(1, 1, 2, 1, tp, 2, 4, "1f1b", 1)
        got = predict_moe(shape, layout, 2, Experts(tp_folded=False), training, device, free)
        dense = predict_llama(dense_shape, layout, training, device, free)
        assert got.time["fsdp_dp"] - dense.time["fsdp_dp"] == pytest.approx(want)
        expert_adamw = 28 * 3932160 / 1e9 + (0.02752512 if tp == 2 else 0.0)
        assert got.time["optimizer"] - dense.time["optimizer"] == pytest.approx(expert_adamw)


def test_host_work_follows_the_device_on_a_cpu_and_bounds_it_on_a_gpu():
    """A step whose device work is d: 0.25 s of host work makes a CPU's step d + 0.25 (host and device one
    thread) and leaves a GPU's at d (the host runs ahead) until the host's exceeds it, 2d: then the step is 2d."""
    shape = moe_shape(moe_predict.moe_config({"size": "debug", "attention": "gqa", "num_kv_heads": 4}))
    device = Device(peak_tflops=1.0, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=1e9)
    training = Training(precision="fp32", overlap=False, fused_optimizer=False)
    free = Network(4, Link(0.0, 0.0), Link(0.0, 0.0))
    layout = LlamaLayout(1, 1, 2, 1, 1, 2, 4, "1f1b", 1)

    def step(**host) -> tuple[float, float, float]:
        got = predict_moe(shape, layout, 2, Experts(tp_folded=False, **host), training, device, free)
        return got.step_s, got.time["host"], got.tokens_per_s_per_device

    d, none, tokens_per_s = step()
    assert none == 0.0
    cpu = step(host_s=0.25, host_serial=True)
    assert cpu[:2] == pytest.approx((d + 0.25, 0.25))
    assert cpu[2] == pytest.approx(tokens_per_s * d / (d + 0.25))
    assert step(host_s=d / 2)[:2] == pytest.approx((d, 0.0))
    assert step(host_s=2 * d)[:2] == pytest.approx((2 * d, d))


def test_a_ranks_experts_run_the_sum_of_their_tokens():
    """The debug size at EP 2 on 2 ranks, the links free and the weights' reads free (1e18 B/s): the experts' time
    and kept activations follow the busiest rank's pairs. With the busiest expert at 1.5x the mean and the busiest
    rank at 1.1x (4 experts a rank average out), both are 1.1 / 1.5 of the expert-paced figures; a capacity
    factor of 1.25 caps a rank at 1.4x to 1.25x, and drops 1 - 1.25 / 1.5 of the busiest expert's tokens."""
    shape = moe_shape(moe_predict.moe_config({"size": "debug", "attention": "gqa", "num_kv_heads": 4}))
    device = Device(peak_tflops=1.0, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=1e18)
    training = Training(precision="fp32", overlap=False, fused_optimizer=False)
    free = Network(2, Link(0.0, 0.0), Link(0.0, 0.0))
    layout = LlamaLayout(1, 1, 2, 1, 1, 2, 4, "1f1b", 1)

    def experts(imbalance: float, rank: float | None, capacity: float | None = None) -> tuple[float, float, float]:
        got = predict_moe(shape, layout, 2, Experts(imbalance, capacity, rank_imbalance=rank, tp_folded=False),
                          training, device, free)  # fmt: skip
        return got.time["experts"], got.memory["activations"], got.dropped_share

    balanced, by_expert, by_rank = experts(1.0, None), experts(1.5, None), experts(1.5, 1.1)
    assert by_expert[0] == pytest.approx(1.5 * balanced[0])
    assert by_rank[0] == pytest.approx(1.1 * balanced[0])
    assert by_rank[1] - balanced[1] == pytest.approx((by_expert[1] - balanced[1]) * 0.1 / 0.5)
    capped = experts(1.5, 1.4, capacity=1.25)
    assert capped[0] == pytest.approx(1.25 * balanced[0])
    assert capped[2] == pytest.approx(1 - 1.25 / 1.5)


def test_expert_memory_under_ep_and_fsdp():
    assert expert_params_per_rank(DSV3, 16, 64) == 2818572288
    assert expert_state_bytes(DSV3, 16, 64, 4) == 11274289152


def test_activation_bytes_per_token_expert_pair_by_hand():
    """DeepSeek-V3 (h 7168, expert SwiGLU 2048) in bf16, selective (the SwiGLU output recomputed): the dispatched
    input, the two projections and the experts' output, 2 x (7168 + 2 x 2048 + 7168) = 36,864 bytes; Megatron
    keeps no experts' output (the scores are weighed into the activation): 2 x (7168 + 4096) = 22,528; under float8
    its input is kept quantized: 7168 + 2 x 4096 = 15,360; no recomputation adds the SwiGLU output, 2048 more."""
    megatron = Training(distributed_optimizer=True, checkpointing="selective")
    assert kept_bytes_per_pair(DSV3, Training(checkpointing="selective")) == 36864
    assert kept_bytes_per_pair(DSV3, megatron) == 22528
    assert kept_bytes_per_pair(DSV3, replace(megatron, float8=True)) == 15360
    assert kept_bytes_per_pair(DSV3, replace(megatron, float8=True, checkpointing="none")) == 15360 + 2048
    assert kept_bytes_per_pair(DSV3, replace(megatron, checkpointing="full")) == 0


def test_mla_activations_by_hand():
    """DeepSeek-V3's MLA per token (128 heads, query/key 128 + 64, values 128, ranks 512 and 1536): dlperf keeps
    128 x (4 x 192 + 128) = 114,688 per-head elements and 576 + 2 x 512 + 3 x 1536 = 6,208 latent ones, Transformer
    Engine 128 x (2 x 192 + 2 x 128) + 576 + 512 + 2 x 1536 = 86,080 (where a GQA count at the latent's width gave
    2 x 7168 + 2 x 512 = 15,360), with the up projections recomputed the output alone of the per-head tensors:
    128 x 128 + 4,160 = 20,544. A Megatron block at TP 1 in bf16 with the dense part's SwiGLU of 2048 + 3 x
    18,432 / 61 = 2,954: 2 x (4 x 7168 + 86,080 + 3 x 2,954) = 247,228 bytes per token; at TP 8 an eighth."""
    kept = mla_kept(moe_predict.moe_config({"size": "deepseek-v3"}))
    assert (kept.heads, kept.latent, kept.te) == (114688, 6208, 86080)
    assert mla_kept(moe_predict.moe_config({"size": "deepseek-v3"}), True).te == 20544
    megatron = Training(te_layers=True, checkpointing="selective")
    assert 2 * _activations_per_token(DSV3.dense, 1, megatron)[0] == 247228
    assert 2 * _activations_per_token(DSV3.dense, 8, megatron)[0] == pytest.approx(247228 / 8)
    assert _activations_per_token(DSV3.dense, 2, Training())[0] == (6 * 7168 + 114688 + 4 * 2954) / 2 + 2 * 7168 + 6208


def test_active_flops_by_hand_and_megatron_bridges_count():
    assert DSV3.flops_per_token == 219753621504 + 61404610560
    assert DSV3.flops_per_token_causal == 219753621504 + 61404610560 // 2
    # Megatron-Bridge's published model TFLOP/s over its tokens/s (docs/performance-summary.md, 25.11, GB300)
    for size, tflops, tokens in (("deepseek-v3", 961, 3848), ("qwen3-235b-a22b", 907, 6131),
                                 ("qwen3-30b-a3b", 666, 28934)):  # fmt: skip
        counted = moe_shape(moe_predict.moe_config({"size": size})).flops_per_token_causal
        assert counted == pytest.approx(tflops * 1e12 / tokens, rel=0.01)


def test_all_to_all_time_by_hand():
    net = Network(8, intra=Link(1e-5, 1 / 360e9), inter=Link(1e-5, 1 / 40e9))
    layout = LlamaLayout(1, 1, 8, 1, 1, 1, 8, "1f1b", 1)
    got = predict_moe(DSV3, layout, 8, Experts(), Training(), H100.device, net)
    assert got.time["all_to_all"] == pytest.approx(0.267214, rel=1e-5)
    assert got.tokens_per_expert == 4096 * 8 * 8 / 256


def test_dlperfs_experts_on_every_tp_rank():
    """dlperf's MoE runs each ep group's experts on every tp rank over the whole sequence: at TP 2 each rank's
    expert tokens and all-to-all bytes are twice a sequence-parallel rank's (Megatron's folding)."""
    net = Network(8, intra=Link(0.0, 1 / 360e9), inter=Link(0.0, 1 / 40e9))
    layout = LlamaLayout(1, 1, 4, 1, 2, 1, 4, "1f1b", 1)
    folded = predict_moe(DSV3, layout, 4, Experts(), Training(), H100.device, net)
    dlperf = predict_moe(DSV3, layout, 4, Experts(tp_folded=False), Training(), H100.device, net)
    assert dlperf.tokens_per_expert == 2 * folded.tokens_per_expert == 4096 * 8 * 4 / 256
    assert dlperf.time["all_to_all"] == pytest.approx(2 * folded.time["all_to_all"])


def test_the_busiest_expert_sets_the_pace_and_capacity_drops():
    values = {"size": "qwen3-30b-a3b", "nodes": 1, "devices_per_node": 8, "ep": 8, "global_batch_size": 64}
    _, balanced = moe_predict.predict({**values, "routing": "balanced"}, H100)
    _, learned = moe_predict.predict({**values, "routing": "learned", "imbalance": 2.0}, H100)
    _, capped = moe_predict.predict({**values, "routing": "learned", "imbalance": 2.0, "capacity_factor": 1.25}, H100)
    assert learned.time["experts"] > 1.9 * balanced.time["experts"]
    assert learned.time["all_to_all"] == pytest.approx(2 * balanced.time["all_to_all"])
    assert capped.dropped_share == pytest.approx(1 - 1.25 / 2)
    assert balanced.step_s < capped.step_s < learned.step_s
    with pytest.raises(ConfigError, match="--imbalance is the learned router's"):
        moe_predict.predict({**values, "routing": "balanced", "imbalance": 2.0}, H100)


def test_layouts_that_do_not_divide_are_refused_in_one_line():
    base = {"size": "deepseek-v3", "nodes": 4, "devices_per_node": 8}
    for given, why in (({"ep": 3}, "num-experts 256 is not divisible by --ep 3"),
                       ({"ep": 64}, "--ep 64 does not divide tp x cp x dp = 32"),
                       ({"tp": 3}, "not divisible by dp_replicate x cp x tp x pp")):  # fmt: skip
        with pytest.raises(ConfigError, match=why):
            moe_predict.predict({**base, **given}, H100)


def test_search_ranks_fitting_layouts_with_why_each_loses():
    values = {"size": "qwen3-30b-a3b", "nodes": 2, "devices_per_node": 8, "global_batch_size": 256}
    fitting, too_big, _ = moe_predict.search(values, H100)
    assert fitting and too_big
    assert [c.prediction.step_s for c in fitting] == sorted(c.prediction.step_s for c in fitting)
    assert all(c.prediction.fits for c in fitting) and not any(c.prediction.fits for c in too_big)
    assert all("step time" in c.reason for c in fitting[1:])


def test_published_points_held_out():
    """Fitted on a third at most; the held-out median within the issue's 15 % (11.6 %), and every held-out point
    beyond 35 % says why in its `outlier` (gpt-oss's three eager BF16 Blackwell rows, Qwen3-30B dropless on 16
    H100s; docs/scaling.md); the other Blackwell points within 17 %, and gpt-oss's NVL72 rows whose recipe graphs
    the whole step and fuses the experts' activation (what the BF16 rows' outliers name) within 15 %."""
    points = moe_predict.published_points()
    assert sum(p["role"] == "fit" for p in points) <= len(points) / 3
    rows = moe_predict.published_errors("check")
    assert median_abs_error(rows) < 0.15
    assert all(isinstance(got.fits, bool) for _, got, _ in rows)
    assert all(p.get("outlier") for p, _, e in rows if abs(e) > 0.35)
    dense_moe = [e for p, _, e in rows if not p["size"].startswith("gpt-oss") and p["accelerator"] != "H100 SXM"]
    assert max(abs(e) for e in dense_moe) < 0.17
    graphed = [e for p, _, e in rows if p["size"] == "gpt-oss-120b" and p["name"].endswith("full-graph")]
    assert len(graphed) == 2 and max(abs(e) for e in graphed) < 0.15


def test_imbalance_and_fp8_recipe_are_refused_for_a_dense_model(capsys):
    code, _, err = run_cli(["predict", "--model", "llama", "--size", "8b", "--accelerator", "H100 SXM",
                            "--imbalance", "1.5"], capsys)  # fmt: skip
    assert_one_line_error(code, err, "--imbalance apply to --model moe")


def test_new_accelerators():
    for name, memory, domain in (("H800", 80, 8), ("B300", 288, 8), ("GB300", 288, 72)):
        setting = setting_for(name, domain, "amp-bf16", "megatron", Training())
        assert setting.accelerator.memory_gib == memory and setting.accelerator.devices_per_node == domain
    assert setting_for("H800", 8, "amp-bf16", "megatron", Training()).accelerator.scale_up_gbs == 200


@pytest.mark.skipif("moe" not in predictors(), reason="the MoE workload (branch h-moe) declares the predictor")
def test_cli_prediction_and_search(capsys):
    base = ["predict", "--model", "moe", "--size", "qwen3-30b-a3b", "--accelerator", "H100 SXM", "--nodes", "2"]
    code, out, _ = run_cli([*base, "--ep", "8", "--routing", "learned", "--imbalance", "1.5", "--json"], capsys)
    assert code == 0
    got = json.loads(out)
    assert got["layout"]["ep"] == 8 and got["prediction"]["time"]["all_to_all"] > 0
    code, out, _ = run_cli([*base, "--global-batch-size", "256", "--search", "--top", "3"], capsys)
    assert code == 0 and "MoE layouts fit" in out and " 1. " in out
    code, _, err = run_cli([*base, "--ep", "3"], capsys)
    assert_one_line_error(code, err, "--ep 3")
