"""The MoE model's parts compute what they should: grouped GEMMs equal the per-expert loop (outputs and gradients,
fp32 and bf16, and under the expanded gradient `sum().backward()` gives), the built model has the counted
parameters, balanced routing is exactly even, a capacity factor drops and counts, and bad input is one line before
any process starts."""

from __future__ import annotations

import pytest
import torch
from tiny import LAYOUT_RUN, tiny_moe

from dlperf.errors import ConfigError
from dlperf.workloads import check_spec, spec_from_mapping
from dlperf.workloads.llama.model import materialize
from dlperf.workloads.moe.config import parameter_counts
from dlperf.workloads.moe.meter import RoutingMeter, window_figures
from dlperf.workloads.moe.model import GroupedExperts, MoE, MoETransformer, Routing, has_grouped_mm
from dlperf.workloads.moe.torch_step import model_shape, routing_of

pytestmark = pytest.mark.skipif(not has_grouped_mm(), reason="this torch has no grouped GEMM")


def tiny_config(**changes):
    return spec_from_mapping(tiny_moe(**changes)).workload


def built(config, routing: Routing | None = None) -> MoETransformer:
    with torch.device("meta"):
        model = MoETransformer(model_shape(config), routing or Routing())
    materialize(model, torch.device("cpu"), seed=0)
    return model


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_gemms_equal_the_loop(dtype):
    """Uneven groups, one empty: the same outputs and gradients (input and weights) both ways."""
    torch.manual_seed(0)
    experts = GroupedExperts(model_shape(tiny_config()), 4).to(dtype)
    for weight in experts.parameters():
        torch.nn.init.normal_(weight, std=0.1)
    counts = torch.tensor([5, 0, 2, 9])
    x = torch.randn(16, 64, dtype=dtype)
    results = []
    for grouped in (True, False):
        rows = x.clone().requires_grad_()
        out = experts(rows, counts, grouped)
        out.sum().backward()  # a stride-0 gradient: grouped_mm's backward needs it made contiguous
        results.append((out.detach(), rows.grad, *(w.grad.clone() for w in experts.parameters())))
        experts.zero_grad()
    tolerance = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    for grouped, loop in zip(*results, strict=True):
        torch.testing.assert_close(grouped, loop, **tolerance)


@pytest.mark.parametrize("attention", ["gqa", "mla"])
def test_the_built_model_has_the_counted_parameters(attention):
    config = tiny_config(attention=attention, q_lora_rank=16 if attention == "mla" else 0)
    counts = parameter_counts(config)
    model = built(config)
    assert sum(p.numel() for p in model.parameters()) == counts.total
    active = counts.total - (config.num_experts - config.top_k) * 3 * 64 * 32 * (config.num_layers - 1)
    assert counts.active == active


def test_balanced_routing_is_even_and_a_capacity_factor_drops():
    config = tiny_config()
    torch.manual_seed(0)
    tokens = torch.randn(2, 32, 64)
    balanced = built(config, Routing(balanced=True)).layers["1"].feed_forward
    balanced(tokens)
    figures = window_figures(balanced.tokens_per_expert.view(1, -1).numpy(), int(balanced.dropped), 2)
    assert (figures["imbalance"], figures["ep_imbalance"], figures["dropped_tokens"]) == (1.0, 1.0, 0)
    assert figures["tokens_per_expert"] == [32] * 4
    dropping: MoE = built(config, Routing(capacity_factor=0.5)).layers["1"].feed_forward
    dropping(tokens)
    kept = dropping.tokens_per_expert
    assert kept.max() <= 16 and kept.sum() + dropping.dropped == 128 and dropping.dropped > 0


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"num_experts": 6, "ep": 4, "devices_per_node": 4}, "--num-experts 6 is not divisible by --ep 4"),
        ({"top_k": 5}, "--top-k 5 is more than the 4 routed experts"),
        ({"ep": 4, "devices_per_node": 2}, "--ep 4 does not divide dp_shard x cp = 2 x 1 = 2"),
        ({"num_heads": 6, "hidden_size": 60, "tp": 4, "devices_per_node": 4}, "MLA's --num-heads 6 is not divisible"),
        ({"num_dense_layers": 3}, "--num-dense-layers 3 is more than the 2 blocks"),
        ({"float8": True}, "--float8 with --model moe is not built yet"),
    ],
)
def test_bad_input_is_one_line(changes, words):
    with pytest.raises(ConfigError, match=words) as refused:
        check_spec(spec_from_mapping(tiny_moe(**changes)))
    assert "\n" not in str(refused.value)


def test_a_capacity_factor_must_be_positive():
    with pytest.raises(ConfigError, match="--capacity-factor must be a positive") as refused:
        spec_from_mapping(tiny_moe(capacity_factor=0))
    assert "\n" not in str(refused.value)


def test_loss_falls_and_the_bias_moves():
    """A few AdamW steps of the learned router with the expert bias: the loss falls and the bias moves, centred."""
    config = tiny_config()
    model = built(config)
    meter = RoutingMeter(config, routing_of(config), distributed=False, device=torch.device("cpu"))
    meter.watch(model.moe_blocks(), {})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 512, (2, 33), generator=generator)
    losses = []
    for _ in range(3):
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        meter.after_step([model])
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    bias = model.moe_blocks()[1].router.expert_bias
    assert bias.abs().max() > 0 and abs(float(bias.sum())) < 1e-6
    assert meter.window.sum() == 3 * 64 * config.top_k


def test_checkpointing_counts_each_pick_once():
    """Full and selective activation checkpointing recompute the forward in backward: the same losses as without,
    and the meter counts each pick once (2 steps x 8 samples x 32 tokens x top 2 over 3 MoE blocks, balanced)."""
    from dlperf.engines.base import RankEnv
    from dlperf.engines.torch.engine import TorchEngine
    from dlperf.workloads import get_workload

    engine = TorchEngine()
    engine.rank = RankEnv(rank=0, world_size=1, local_rank=0, local_world_size=1)
    results = []
    for checkpoint in ("none", "full", "selective"):
        spec = spec_from_mapping(tiny_moe(**LAYOUT_RUN, activation_checkpoint=checkpoint, routing="balanced"))
        step = get_workload("moe").builder("torch")(spec, check_spec(spec), engine)
        (meter,) = step.probes
        meter.start()
        losses = [step.read_loss(step.run()) for _ in range(2)]
        meter.stop()
        results.append((losses, step.model["moe"]["tokens_per_expert"]))
    assert results[0][1] == [2 * 8 * 32 * 2 * 3 // 4] * 4
    assert results[1] == results[0] and results[2] == results[0]


def test_mla_keeps_what_the_prediction_counts():
    """What autograd saves in one forward of the debug size's latent attention (16 heads, query rank 0), fp32: the
    prediction's count per token (predict_model.mla_kept: 16 x 896 per-head and 576 + 2 x 512 latent elements)
    and besides only attention's logsumexp (one per head) and kv_norm's reciprocal RMS (one)."""
    from dlperf.workloads.llama.model import rope_tables
    from dlperf.workloads.moe.model import LatentAttention
    from dlperf.workloads.moe.predict import moe_config
    from dlperf.workloads.moe.predict_model import mla_kept

    config = moe_config({"size": "debug", "seq_length": 64})
    shape = model_shape(config)
    attention = LatentAttention(shape)
    cos, sin = rope_tables(shape.rotary())
    x = torch.randn(2, 64, shape.hidden_size, requires_grad=True)
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention(x, cos, sin)
    for t in (x, cos, sin, *attention.parameters()):
        storages.pop(t.untyped_storage().data_ptr(), None)
    kept = mla_kept(config)
    assert (kept.heads, kept.latent) == (16 * (4 * 192 + 128), 576 + 2 * 512)
    assert sum(storages.values()) / (2 * 64 * 4) == kept.heads + kept.latent + 16 + 1
