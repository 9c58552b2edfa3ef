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


def param_spec(shards: int, tp: int, names: tuple[str, ...], shape: tuple[int, ...]) -> P:
    """A parameter's split: the TP plan's dimension over "tp", and FSDP's shard over ("fsdp", "cp") (`shards`
    ranks: context-parallel ranks hold shards too, as FSDP2 shards over dp_shard x cp in the PyTorch step) on the
    first other dimension that divides; a vector, a norm's scale, stays whole."""
    if names[-2:] == ("tok_embeddings", "embedding") and shards > 1 and shape[0] % (shards * tp) == 0:
        # the vocabulary over every split, so that the looked-up rows come out whole in the hidden dimension (split
        # there, XLA would have to re-gather each row to the batch's sharding)
        return P((*(("tp",) if tp > 1 else ()), "fsdp", "cp"), None)
    axes: list = list(TP_PLAN.get(names[-2:], (None,) * len(shape))) if tp > 1 else [None] * len(shape)
    if shards > 1 and len(shape) == 2:
        free = _shardable_dimension(axes, shape, shards)
        if free is not None:
            axes[free] = ("fsdp", "cp")
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


class Block(nn.Module):
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    dtype: Any
    attention: str | None

    @nn.compact
    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        batch, seq, _ = x.shape
        d = self.hidden_size // self.num_heads

        def dense(features: int, name: str) -> nn.Dense:
            return nn.Dense(features, use_bias=False, dtype=self.dtype, kernel_init=normal_init, name=name)

        y = nn.RMSNorm(epsilon=NORM_EPS, dtype=self.dtype, name="attention_norm")(x)
        q = dense(self.num_heads * d, "wq")(y).reshape(batch, seq, self.num_heads, d)
        k = dense(self.num_kv_heads * d, "wk")(y).reshape(batch, seq, self.num_kv_heads, d)
        v = dense(self.num_kv_heads * d, "wv")(y).reshape(batch, seq, self.num_kv_heads, d)
        attn = jax.nn.dot_product_attention(
            rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True, implementation=self.attention
        )  # grouped-query: each k/v head serves num_heads / num_kv_heads query heads
        x = x + dense(self.hidden_size, "wo")(attn.reshape(batch, seq, -1))
        y = nn.RMSNorm(epsilon=NORM_EPS, dtype=self.dtype, name="ffn_norm")(x)
        gate = jax.nn.silu(dense(self.ffn_hidden_size, "w1")(y)) * dense(self.ffn_hidden_size, "w3")(y)
        return x + dense(self.hidden_size, "w2")(gate)


class Llama(nn.Module):
    """Token ids (B, T) -> logits (B, T, vocab) in `dtype`."""

    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    vocab_size: int
    rope_theta: float
    dtype: Any = jnp.float32
    attention: str | None = None  # jax.nn.dot_product_attention's implementation (language_model/jax_parts.py)
    remat: str = "none"

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        d = self.hidden_size // self.num_heads
        freqs = 1.0 / self.rope_theta ** (jnp.arange(d // 2, dtype=jnp.float32) * 2 / d)
        angles = jnp.outer(jnp.arange(tokens.shape[1], dtype=jnp.float32), freqs)
        cos, sin = jnp.cos(angles), jnp.sin(angles)
        x = nn.Embed(self.vocab_size, self.hidden_size, dtype=self.dtype, embedding_init=normal_init,
                     name="tok_embeddings")(tokens)  # fmt: skip
        policy = REMAT_POLICIES[self.remat]
        block = Block if self.remat == "none" else nn.remat(Block, policy=policy)
        for i in range(self.num_layers):
            x = block(self.hidden_size, self.num_heads, self.num_kv_heads, self.ffn_hidden_size, self.dtype,
                      self.attention, name=f"layers_{i}")(x, cos, sin)  # fmt: skip
        x = nn.RMSNorm(epsilon=NORM_EPS, dtype=self.dtype, name="norm")(x)
        return nn.Dense(self.vocab_size, use_bias=False, dtype=self.dtype, kernel_init=normal_init, name="output")(x)
