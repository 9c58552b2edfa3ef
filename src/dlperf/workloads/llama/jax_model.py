"""The Llama 3 decoder of model.py in Flax: RMSNorm, rotary embeddings on adjacent pairs, grouped-query causal
attention through jax.nn.dot_product_attention, SwiGLU, untied output; blocks rematerialised as asked.

Parameter names mirror the PyTorch module (wq/wk/wv/wo, w1/w2/w3, tok_embeddings, output), so `param_spec` reads like
parallel.py's PyTorch plan: Megatron's split over "tp", and FSDP's over ("fsdp", "cp") on the other dimension of each
matrix.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.sharding import PartitionSpec as P

from dlperf.workloads.llama.model import INIT_STD, NORM_EPS

normal_init = nn.initializers.normal(stddev=INIT_STD)
# recomputation in backward, as the PyTorch step's --activation-checkpoint: nothing kept but each block's input
# (full), or the matmuls against weights kept (selective); None: no remat
REMAT_POLICIES = {
    "none": None,
    "selective": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "full": jax.checkpoint_policies.nothing_saveable,
}
# (module, parameter) -> how it splits over "tp": q/k/v, w1, w3 and the output column-wise, wo and w2 row-wise, the
# embedding over the vocabulary; the norms are replicated
TP_PLAN: dict[tuple[str, str], tuple[str | None, ...]] = {
    **{(name, "kernel"): (None, "tp") for name in ("wq", "wk", "wv", "w1", "w3", "output")},
    **{(name, "kernel"): ("tp", None) for name in ("wo", "w2")},
    ("tok_embeddings", "embedding"): ("tp", None),
}


def param_spec(
    shards: int, tp: int, names: tuple[str, ...], shape: tuple[int, ...], fsdp: tuple[str, ...] = ("fsdp", "cp")
) -> P:
    """A parameter's split: the TP plan's dimension over "tp", and FSDP's shard over `fsdp` (`shards` ranks:
    context-parallel ranks hold shards too, as FSDP2 shards over dp_shard x cp in the PyTorch step; the MoE's
    expert-parallel ranks too) on the first other dimension that divides; a vector, a norm's scale, stays whole."""
    if names[-2:] == ("tok_embeddings", "embedding") and shards > 1 and shape[0] % (shards * tp) == 0:
        # the vocabulary over every split, so that the looked-up rows come out whole in the hidden dimension (split
        # there, XLA would have to re-gather each row to the batch's sharding)
        return P((*(("tp",) if tp > 1 else ()), *fsdp), None)
    axes: list = list(TP_PLAN.get(names[-2:], (None,) * len(shape))) if tp > 1 else [None] * len(shape)
    if shards > 1 and len(shape) == 2:
        free = _shardable_dimension(axes, shape, shards)
        if free is not None:
            axes[free] = fsdp
    return P(*axes)


def _shardable_dimension(axes: list, shape: tuple[int, ...], shards: int) -> int | None:
    """The first dimension of a matrix that tp leaves whole and `shards` divides, or None."""
    return next((d for d in range(2) if axes[d] is None and shape[d] % shards == 0), None)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate each adjacent pair (2i, 2i+1) of x (batch, seq, heads, head_dim) by its position's angle, in fp32."""
    pairs = x.astype(jnp.float32).reshape(*x.shape[:-1], -1, 2)
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return jnp.stack((even * cos - odd * sin, even * sin + odd * cos), axis=-1).reshape(x.shape).astype(x.dtype)


def dense(features: int, name: str, dtype: Any) -> nn.Dense:
    """A bias-free projection drawn N(0, INIT_STD), a child of the module whose compact method calls it."""
    return nn.Dense(features, use_bias=False, dtype=dtype, kernel_init=normal_init, name=name)


def rope_tables(head_dim: int, seq_length: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """cos and sin (seq, head_dim / 2) of each position's angle per rotated pair."""
    freqs = 1.0 / theta ** (jnp.arange(head_dim // 2, dtype=jnp.float32) * 2 / head_dim)
    angles = jnp.outer(jnp.arange(seq_length, dtype=jnp.float32), freqs)
    return jnp.cos(angles), jnp.sin(angles)


def gqa_attention(y: jax.Array, cos: jax.Array, sin: jax.Array, num_heads: int, num_kv_heads: int, head_dim: int,
                  dtype: Any, implementation: str | None) -> jax.Array:  # fmt: skip
    """Grouped-query causal attention of y (batch, seq, hidden) with its projections wq/wk/wv/wo made in the calling
    module (Llama's block, the MoE's): each k/v head serves num_heads / num_kv_heads query heads."""
    batch, seq, hidden = y.shape
    q = dense(num_heads * head_dim, "wq", dtype)(y).reshape(batch, seq, num_heads, head_dim)
    k = dense(num_kv_heads * head_dim, "wk", dtype)(y).reshape(batch, seq, num_kv_heads, head_dim)
    v = dense(num_kv_heads * head_dim, "wv", dtype)(y).reshape(batch, seq, num_kv_heads, head_dim)
    attn = jax.nn.dot_product_attention(
        rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True, implementation=implementation
    )
    return dense(hidden, "wo", dtype)(attn.reshape(batch, seq, -1))


def swiglu(y: jax.Array, ffn_hidden_size: int, dtype: Any) -> jax.Array:
    """SwiGLU w2(silu(w1 y) * w3 y), its matrices made in the calling module."""
    gate = jax.nn.silu(dense(ffn_hidden_size, "w1", dtype)(y)) * dense(ffn_hidden_size, "w3", dtype)(y)
    return dense(y.shape[-1], "w2", dtype)(gate)


class Block(nn.Module):
    """Llama's block of `config`; the MoE's (moe/jax_model.py) has its own `attend` and `feed_forward`."""

    config: Any  # a LlamaConfig (the MoE's: its MoEConfig)
    layer: int
    dtype: Any
    attention: str | None  # jax.nn.dot_product_attention's implementation (language_model/jax_parts.py)

    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        y = nn.RMSNorm(epsilon=NORM_EPS, dtype=self.dtype, name="attention_norm")(x)
        x = x + self.attend(y, cos, sin)
        y = nn.RMSNorm(epsilon=NORM_EPS, dtype=self.dtype, name="ffn_norm")(x)
        return x + self.feed_forward(y)

    def attend(self, y: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        c = self.config
        head_dim = c.hidden_size // c.num_heads
        return gqa_attention(y, cos, sin, c.num_heads, c.num_kv_heads, head_dim, self.dtype, self.attention)

    def feed_forward(self, y: jax.Array) -> jax.Array:
        return swiglu(y, self.config.ffn_hidden_size, self.dtype)


class Llama(nn.Module):
    """Token ids (B, T) -> logits (B, T, vocab) in `dtype`; the blocks (`block_type`, made by `block`) rematerialised
    as `config.activation_checkpoint` asks."""

    config: Any
    dtype: Any = jnp.float32
    attention: str | None = None
    block_type = Block

    def block(self, block_type: Any, layer: int) -> nn.Module:
        return block_type(self.config, layer, self.dtype, self.attention, name=f"layers_{layer}")

    def rotary_dim(self) -> int:
        return self.config.hidden_size // self.config.num_heads

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        c = self.config
        cos, sin = rope_tables(self.rotary_dim(), tokens.shape[1], c.rope_theta)
        x = nn.Embed(c.vocab_size, c.hidden_size, dtype=self.dtype, embedding_init=normal_init,
                     name="tok_embeddings")(tokens)  # fmt: skip
        remat = c.activation_checkpoint
        block = self.block_type if remat == "none" else nn.remat(self.block_type, policy=REMAT_POLICIES[remat])
        for i in range(c.num_layers):
            x = self.block(block, i)(x, cos, sin)
        x = nn.RMSNorm(epsilon=NORM_EPS, dtype=self.dtype, name="norm")(x)
        return nn.Dense(c.vocab_size, use_bias=False, dtype=self.dtype, kernel_init=normal_init, name="output")(x)
