"""The MoE decoder of model.py in Flax: Llama's JAX parts (RMSNorm, rotary pairs, grouped-query attention, SwiGLU;
imported from workloads/llama/jax_model.py) or DeepSeek's multi-head latent attention, and past the first
`num_dense_layers` blocks a mixture-of-experts feed-forward whose routed experts run inside one `jax.shard_map`.

Inside it each device routes its own tokens (the torch rule: softmax or sigmoid scores, the top-k of the scores
plus the aux-loss-free expert bias, DeepSeek's normalised and scaled weights, or `balanced`'s pick (i * k + j) mod
E; a capacity factor keeps each expert's first ceil(cf * tokens * k / E) picks in token order), sorts the picks by
expert, sends them to the devices holding their experts with `jax.lax.all_to_all` over the "expert" axis, runs
the local experts as `jax.lax.ragged_dot` grouped matmuls and sends the rows back. XLA's all-to-all needs one
static size: each device sends every peer a buffer of its worst case (all its picks, or the peer's experts'
capacity), so dispatch stays dropless at `ep` times the traffic of the picks themselves.

Parameter names mirror the torch module (feed_forward.gate/w1/w2/w3 stacked (experts, in, out), shared_experts),
so `param_spec` reads like parallel.py's plan. The counts of each block live in the "moe" collection.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from dlperf.workloads.llama import jax_model as llama
from dlperf.workloads.llama.jax_model import (
    dense,
    gqa_attention,
    normal_init,
    rotate,
    swiglu,
)
from dlperf.workloads.llama.model import NORM_EPS
from dlperf.workloads.moe.config import MoEConfig

EXPERT_AXIS = "ep"
EXPERT_WEIGHTS = ("w1", "w2", "w3")  # the routed experts' stacked matrices, (experts, in, out)
ROUTING_STATE = "moe"  # the Flax collection of each MoE block's expert bias and counts


def uses_bias(config: MoEConfig) -> bool:
    return config.routing == "learned" and config.load_balance == "bias"


def aux_coef(config: MoEConfig) -> float:
    return config.aux_loss_coef if config.routing == "learned" and config.load_balance == "aux" else 0.0


def param_spec(shards: int, ep: int, names: tuple[str, ...], shape: tuple[int, ...]) -> P:
    """An expert matrix split over "ep" by expert and FSDP-sharded over the rest of dp_shard ("fsdp") on the first
    other dimension that divides; every other parameter Llama's FSDP split over the whole of dp_shard."""
    if names[-2:] in {("feed_forward", name) for name in EXPERT_WEIGHTS}:
        rest = shards // ep
        free = next((d for d in (1, 2) if rest > 1 and shape[d] % rest == 0), None)
        return P(EXPERT_AXIS, *("fsdp" if d == free else None for d in (1, 2)))
    return llama.param_spec(shards, 1, names, shape, fsdp=("fsdp", EXPERT_AXIS))


@jax.custom_vjp
def attach_loss(out: jax.Array, aux: jax.Array) -> jax.Array:
    """Megatron-Core's MoEAuxLossAutoScaler (torch's _AttachLoss): `out` unchanged, the auxiliary loss's gradient
    (1) started in backward, so the loss the step reads stays the language model's."""
    return out


def _attach_fwd(out: jax.Array, aux: jax.Array) -> tuple[jax.Array, jax.Array]:
    return out, aux


def _attach_bwd(aux: jax.Array, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    return grad, jnp.ones_like(aux)


attach_loss.defvjp(_attach_fwd, _attach_bwd)


def route(config: MoEConfig, x: jax.Array, gate: jax.Array, bias: jax.Array) -> tuple[jax.Array, ...]:
    """(expert ids, their weights), both (tokens, top_k), and the fp32 scores (tokens, experts): model.py's Router."""
    logits = jnp.dot(x, gate.astype(x.dtype)).astype(jnp.float32)
    scores = jax.nn.softmax(logits, -1) if config.score_func == "softmax" else jax.nn.sigmoid(logits)
    k = config.top_k
    if config.routing == "balanced":  # token i's j-th choice is expert (i * k + j) mod E
        ids = (jnp.arange(x.shape[0] * k) % config.num_experts).reshape(-1, k)
    else:
        ids = jax.lax.top_k(scores + bias if uses_bias(config) else scores, k)[1]
    weights = jnp.take_along_axis(scores, ids, 1)
    if config.route_norm:
        weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
    return ids, weights * config.route_scale, scores


def capacity_of(config: MoEConfig, tokens: int) -> int | None:
    """Picks an expert keeps per device (torch's per rank), or None: dropless."""
    if config.capacity_factor is None:
        return None
    return math.ceil(config.capacity_factor * tokens * config.top_k / config.num_experts)


def sort_picks(flat: jax.Array, experts: int, capacity: int | None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The picks sorted by expert, token order within one (a stable sort), those beyond an expert's capacity moved
    to the end: (order, each sorted pick's expert or `experts` where dropped, kept picks per expert)."""
    order = jnp.argsort(flat, stable=True)
    counts = jnp.bincount(flat, length=experts)
    if capacity is None:
        return order, flat[order], counts
    expert = flat[order]
    keep = jnp.arange(flat.size) - (jnp.cumsum(counts) - counts)[expert] < capacity
    key = jnp.where(keep, expert, experts)
    again = jnp.argsort(key, stable=True)
    return order[again], key[again], jnp.minimum(counts, capacity)


def expert_ffn(rows: jax.Array, w1: jax.Array, w2: jax.Array, w3: jax.Array, sizes: jax.Array) -> jax.Array:
    """SwiGLU of each row with its expert's matrices: rows sorted by local expert, sizes[e] of them for e; the rows
    past sum(sizes) come out zero."""
    cast = lambda w: w.astype(rows.dtype)  # noqa: E731
    hidden = jax.nn.silu(jax.lax.ragged_dot(rows, cast(w1), sizes)) * jax.lax.ragged_dot(rows, cast(w3), sizes)
    return jax.lax.ragged_dot(hidden, cast(w2), sizes)


def exchange(x: jax.Array) -> jax.Array:
    """Block p of x's first axis to peer p of the expert axis; block s of the result from peer s."""
    return jax.lax.all_to_all(x, EXPERT_AXIS, 0, 0, tiled=True)


def dispatch_and_run(
    tokens: jax.Array, picks: tuple[jax.Array, jax.Array, jax.Array], weights_of: tuple[jax.Array, ...], ep: int,
    slots: int, top_k: int,
) -> jax.Array:  # fmt: skip
    """Every kept pick's row to the peer holding its expert, the local experts on what arrived, the results back to
    their slots, and each token's picks summed with their weights: (tokens, hidden) before the weights' sum."""
    order, expert, kept = picks
    local = kept.size // ep
    per_peer = kept.reshape(ep, local).sum(1)
    starts = jnp.cumsum(per_peer) - per_peer
    slot = jnp.arange(slots)
    index = jnp.minimum(starts[:, None] + slot[None, :], order.size - 1)
    valid = slot[None, :] < per_peer[:, None]
    send = jnp.where(valid[..., None], tokens[order[index] // top_k], 0).astype(tokens.dtype)  # (ep, slots, hidden)
    arrived_counts = exchange(kept.reshape(ep, local))  # row s: source s's picks of my experts
    arrived = exchange(send).reshape(ep * slots, -1)
    bounds = jnp.cumsum(arrived_counts, 1)
    local_expert = (slot[None, :, None] >= bounds[:, None, :]).sum(-1).reshape(-1)  # `local` past the last row
    by_expert = jnp.argsort(local_expert, stable=True)
    done = expert_ffn(arrived[by_expert], *weights_of, arrived_counts.sum(0))
    back = exchange(done[jnp.argsort(by_expert)].reshape(ep, slots, -1))
    position = jnp.argsort(order)  # each pick's place in the sorted order
    pick_expert = expert[position]
    peer = jnp.minimum(pick_expert // local, ep - 1)
    row = back[peer, jnp.clip(position - starts[peer], 0, slots - 1)]
    return jnp.where((pick_expert < kept.size)[:, None], row, 0)


class MoEFeedForward(nn.Module):
    """The routed experts (inside one shard_map over `mesh`, tokens split over `batch_axes`) and the shared ones."""

    config: MoEConfig
    dtype: Any
    mesh: Mesh
    batch_axes: tuple[str, ...]

    @nn.compact
    def __call__(self, y: jax.Array) -> jax.Array:
        c = self.config
        h, f, experts = c.hidden_size, c.moe_ffn_hidden_size, c.num_experts
        gate = self.param("gate", normal_init, (h, experts))
        weights = [self.param(name, normal_init, (experts, *dims)) for name, dims in
                   (("w1", (h, f)), ("w2", (f, h)), ("w3", (h, f)))]  # fmt: skip
        bias = self.variable(ROUTING_STATE, "expert_bias", jnp.zeros, (experts,), jnp.float32)
        routed, counts, dropped, aux = self._routed(y, gate, weights, bias.value)
        # this iteration's kept picks per expert (the bias update's), and the run's so far with its dropped picks
        for name, value in (("step_counts", counts), ("counts", counts), ("dropped", dropped)):
            held = self.variable(ROUTING_STATE, name, jnp.zeros, value.shape, jnp.int32)
            if not self.is_initializing():
                held.value = held.value + value
        if aux_coef(c):
            routed = attach_loss(routed, aux)
        if c.num_shared_experts:
            routed = routed + SwiGLU(c.num_shared_experts * f, self.dtype, name="shared_experts")(y)
        return routed

    def _routed(self, y: jax.Array, gate: jax.Array, weights: list, bias: jax.Array) -> tuple[jax.Array, ...]:
        c, ep = self.config, self.mesh.shape[EXPERT_AXIS]
        every = tuple(self.mesh.axis_names)

        def local(x: jax.Array, gate: jax.Array, w1: jax.Array, w2: jax.Array, w3: jax.Array, bias: jax.Array):
            tokens = x.reshape(-1, x.shape[-1])
            ids, pick_weights, scores = route(c, tokens, gate, bias)
            capacity = capacity_of(c, tokens.shape[0])
            picks = sort_picks(ids.reshape(-1), c.num_experts, capacity)
            slots = ids.size if capacity is None else min(ids.size, capacity * (c.num_experts // ep))
            rows = dispatch_and_run(tokens, picks, (w1, w2, w3), ep, slots, c.top_k)
            out = (rows.reshape(*ids.shape, -1) * pick_weights[..., None].astype(rows.dtype)).sum(1)
            kept = picks[2]
            dropped = ids.size - kept.sum()
            aux = balance_loss(c, scores, ids)
            return (out.reshape(x.shape), jax.lax.psum(kept, every), jax.lax.psum(dropped, every),
                    jax.lax.pmean(aux, every))  # fmt: skip

        tokens = P(self.batch_axes, None, None)
        experts = P(EXPERT_AXIS, None, None)
        return jax.shard_map(
            local,
            mesh=self.mesh,
            in_specs=(tokens, P(), experts, experts, experts, P()),
            out_specs=(tokens, P(), P(), P()),
        )(y, gate, *weights, bias)


def balance_loss(config: MoEConfig, scores: jax.Array, ids: jax.Array) -> jax.Array:
    """The Switch Transformer's load-balancing loss coef x E x sum_e f_e P_e over this device's tokens (torch's
    per rank): f the share of picks to expert e (no gradient), P its mean normalised score; 0 without one."""
    coef = aux_coef(config)
    if not coef:
        return jnp.zeros((), jnp.float32)
    share = jnp.bincount(ids.reshape(-1), length=config.num_experts).astype(jnp.float32) / ids.size
    probability = (scores / scores.sum(-1, keepdims=True)).mean(0)
    return coef * config.num_experts * (share * probability).sum()


class SwiGLU(nn.Module):
    """A dense feed-forward as its own module (the dense blocks' `feed_forward`, the shared experts)."""

    hidden: int
    dtype: Any

    @nn.compact
    def __call__(self, y: jax.Array) -> jax.Array:
        return swiglu(y, self.hidden, self.dtype)


def latent_attention(y: jax.Array, cos: jax.Array, sin: jax.Array, config: MoEConfig, dtype: Any,
                     implementation: str | None) -> jax.Array:  # fmt: skip
    """DeepSeek's multi-head latent attention (model.py's LatentAttention), its projections made in the calling
    block: a low-rank query (or a full one at q_lora_rank 0), keys and values from one shared latent, each head's key
    a no-rotary part from the latent and one rotary part shared by all heads. The values are zero-padded to the
    query width for jax.nn.dot_product_attention (which takes one head size), and cut back after."""
    batch, seq, hidden = y.shape
    heads, nope, rope, v_dim = config.num_heads, config.qk_nope_head_dim, config.qk_rope_head_dim, config.v_head_dim
    if config.q_lora_rank == 0:
        q = dense(heads * (nope + rope), "wq", dtype)(y)
    else:
        low = nn.RMSNorm(epsilon=NORM_EPS, dtype=dtype, name="q_norm")(dense(config.q_lora_rank, "wq_a", dtype)(y))
        q = dense(heads * (nope + rope), "wq_b", dtype)(low)
    q_nope, q_rope = jnp.split(q.reshape(batch, seq, heads, nope + rope), [nope], axis=-1)
    latent, k_rope = jnp.split(dense(config.kv_lora_rank + rope, "wkv_a", dtype)(y), [config.kv_lora_rank], axis=-1)
    latent = nn.RMSNorm(epsilon=NORM_EPS, dtype=dtype, name="kv_norm")(latent)
    kv = dense(heads * (nope + v_dim), "wkv_b", dtype)(latent).reshape(batch, seq, heads, nope + v_dim)
    k_nope, v = jnp.split(kv, [nope], axis=-1)
    k_rope = jnp.broadcast_to(rotate(k_rope[:, :, None, :], cos, sin), (batch, seq, heads, rope))
    q = jnp.concatenate((q_nope, rotate(q_rope, cos, sin)), axis=-1)
    k = jnp.concatenate((k_nope, k_rope), axis=-1)
    padded = jnp.pad(v, ((0, 0), (0, 0), (0, 0), (0, nope + rope - v_dim)))
    out = jax.nn.dot_product_attention(q, k, padded, is_causal=True, implementation=implementation)[..., :v_dim]
    return dense(hidden, "wo", dtype)(out.reshape(batch, seq, -1))


class Block(llama.Block):
    """Llama's block with the attention of the config's choice and a MoE feed-forward past the dense blocks."""

    mesh: Mesh | None = None
    batch_axes: tuple[str, ...] = ()

    def attend(self, y: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        c = self.config
        if c.attention == "gqa":
            return gqa_attention(y, cos, sin, c.num_heads, c.num_kv_heads, c.head_dim, self.dtype, self.attention)
        return latent_attention(y, cos, sin, c, self.dtype, self.attention)

    def feed_forward(self, y: jax.Array) -> jax.Array:
        c = self.config
        if self.layer < c.num_dense_layers:
            return SwiGLU(c.ffn_hidden_size, self.dtype, name="feed_forward")(y)
        return MoEFeedForward(c, self.dtype, self.mesh, self.batch_axes, name="feed_forward")(y)


class MoETransformer(llama.Llama):
    """Llama's decoder of MoE blocks, its batch split over `batch_axes` of `mesh`."""

    mesh: Mesh | None = None
    batch_axes: tuple[str, ...] = ()
    block_type = Block

    def block(self, block_type: Any, layer: int) -> nn.Module:
        return block_type(self.config, layer, self.dtype, self.attention, self.mesh, self.batch_axes,
                          name=f"layers_{layer}")  # fmt: skip

    def rotary_dim(self) -> int:
        return self.config.head_dim if self.config.attention == "gqa" else self.config.qk_rope_head_dim
