"""The JAX MoE's routing pieces against torch's rules: a capacity factor keeps each expert's first picks in token
order and counts the rest, balanced routing spreads the picks evenly, the expert bias moves centred, the meter writes
the torch meter's fields, and a layout the JAX step does not build is refused in one line."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

jnp = pytest.importorskip("jax.numpy", reason="the JAX engine needs jax, flax and optax: pip install 'dlperf[jax]'")

from dlperf.errors import ConfigError  # noqa: E402
from dlperf.workloads.llama.layout import LlamaLayout  # noqa: E402
from dlperf.workloads.moe.config import BIAS_UPDATE_RATE, MoEConfig  # noqa: E402
from dlperf.workloads.moe.jax_model import capacity_of, route, sort_picks  # noqa: E402
from dlperf.workloads.moe.jax_step import mesh_axes, move_bias  # noqa: E402
from dlperf.workloads.moe.routing import window_figures  # noqa: E402


def test_capacity_keeps_each_experts_first_picks_in_token_order():
    flat = jnp.asarray([2, 0, 2, 2, 1, 2, 0])  # expert 2 picked four times, capacity 2
    order, expert, kept = sort_picks(flat, 3, capacity=2)
    assert kept.tolist() == [2, 1, 2]
    assert order[:5].tolist() == [1, 6, 4, 0, 2]  # expert 0's picks, 1's, then 2's first two (tokens 0 and 2)
    assert expert.tolist() == [0, 0, 1, 2, 2, 3, 3]  # the dropped picks (tokens 3 and 5) last, marked past E
    assert sorted(order[5:].tolist()) == [3, 5]
    config = replace(MoEConfig(), num_experts=8, top_k=3, capacity_factor=1.25)
    assert capacity_of(config, 100) == 47 and capacity_of(replace(config, capacity_factor=None), 100) is None


def test_balanced_routing_spreads_picks_evenly_and_weights_are_normalised():
    config = replace(MoEConfig(), num_experts=4, top_k=2, routing="balanced", route_norm=True, route_scale=2.5,
                     score_func="sigmoid")  # fmt: skip
    tokens = jnp.linspace(-1.0, 1.0, 10 * 6).reshape(10, 6)
    ids, weights, _ = route(config, tokens, jnp.ones((6, 4)) * jnp.arange(4.0), jnp.zeros(4))
    assert jnp.bincount(ids.reshape(-1), length=4).tolist() == [5, 5, 5, 5]
    assert weights.sum(-1) == pytest.approx([2.5] * 10)


def test_bias_moves_centred_by_the_iterations_counts():
    counts = jnp.asarray([5, 1, 1, 1])
    block = {"expert_bias": jnp.zeros(4), "step_counts": counts, "counts": counts, "dropped": jnp.zeros((), int)}
    state = {"layers_1": {"feed_forward": block}}
    moved = move_bias(True, state)["layers_1"]["feed_forward"]
    rate = BIAS_UPDATE_RATE
    assert moved["expert_bias"].tolist() == pytest.approx([-1.5 * rate, 0.5 * rate, 0.5 * rate, 0.5 * rate])
    assert moved["step_counts"].tolist() == [0, 0, 0, 0] and moved["counts"].tolist() == [5, 1, 1, 1]
    assert move_bias(False, state)["layers_1"]["feed_forward"]["expert_bias"].tolist() == [0, 0, 0, 0]


def test_layouts_the_jax_step_does_not_build_are_refused():
    layout = LlamaLayout(1, 1, 4, 1, 1, 1, 4, "1f1b", 1)
    assert mesh_axes(replace(MoEConfig(), ep=2), layout) == (("dp", 1), ("fsdp", 2), ("ep", 2))
    with pytest.raises(ConfigError, match="--ep 3 must divide"):
        mesh_axes(replace(MoEConfig(), ep=3), layout)
    with pytest.raises(ConfigError, match="--tp with --model moe is not built on the JAX engine"):
        mesh_axes(MoEConfig(), replace(layout, tp=2, dp_shard=2))


def test_window_figures_are_the_torch_meters_fields():
    counts = np.asarray([[6, 2, 2, 2], [3, 3, 3, 3]])  # 2 blocks, 4 experts, ep 2
    figures = window_figures(counts, dropped=4, ep=2)
    assert figures["tokens_per_expert"] == [9, 5, 5, 5] and figures["tokens_per_ep_rank"] == [14, 10]
    assert figures["imbalance"] == pytest.approx((2.0 + 1.0) / 2) and figures["imbalance_worst_block"] == 2.0
    assert figures["ep_imbalance"] == pytest.approx((8 / 6 + 1.0) / 2)
    assert (figures["routed_tokens"], figures["dropped_tokens"]) == (28, 4)
