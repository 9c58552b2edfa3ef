"""The GPT decoder of model.py in Flax: pre-LayerNorm blocks, causal attention through
jax.nn.dot_product_attention, 4x exact-GELU MLP, learned positions, output tied to the token embedding.

Parameter names mirror the PyTorch module (wq/wk/wv/wo, fc_in/fc_out, tok_emb/pos_emb) so that TP_PLAN reads like
parallel.py's PyTorch plan (Megatron's split); the parameter count is the same as the PyTorch count_parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.sharding import PartitionSpec as P

normal_init = nn.initializers.normal(stddev=0.02)  # GPT-2's N(0, 0.02) weights, zero biases
LN_EPS = 1e-5  # torch.nn.LayerNorm's default

# Flax parameter path (module, parameter) -> how it is split over "tp"; everything else is replicated: q/k/v and
# MLP-in column-wise, attention-out and MLP-out row-wise, the token embedding (and the tied output) over the vocab.
TP_PLAN: dict[tuple[str, str], P] = {
    **{(name, "kernel"): P(None, "tp") for name in ("wq", "wk", "wv", "fc_in")},  # column-wise
    **{(name, "bias"): P("tp") for name in ("wq", "wk", "wv", "fc_in")},
    **{(name, "kernel"): P("tp", None) for name in ("wo", "fc_out")},  # row-wise; their bias is replicated
    ("tok_emb", "embedding"): P("tp", None),  # vocab-parallel embedding and tied output
}


class Block(nn.Module):
    hidden_size: int
    num_heads: int
    dtype: Any
    attention: str | None

    def setup(self) -> None:
        h = self.hidden_size
        dense = lambda features: nn.Dense(features, dtype=self.dtype, kernel_init=normal_init)  # noqa: E731
        self.attn_norm = nn.LayerNorm(epsilon=LN_EPS, dtype=self.dtype)
        self.wq, self.wk, self.wv, self.wo = dense(h), dense(h), dense(h), dense(h)
        self.mlp_norm = nn.LayerNorm(epsilon=LN_EPS, dtype=self.dtype)
        self.fc_in, self.fc_out = dense(4 * h), dense(h)

    def __call__(self, x: jax.Array) -> jax.Array:
        batch, seq, _ = x.shape
        heads = lambda t: t.reshape(batch, seq, self.num_heads, -1)  # noqa: E731  (B, T, N, H), JAX's layout
        y = self.attn_norm(x)
        attn = jax.nn.dot_product_attention(
            heads(self.wq(y)), heads(self.wk(y)), heads(self.wv(y)), is_causal=True, implementation=self.attention
        )
        x = x + self.wo(attn.reshape(batch, seq, -1))
        return x + self.fc_out(jax.nn.gelu(self.fc_in(self.mlp_norm(x)), approximate=False))  # torch's exact GELU


class GPT(nn.Module):
    """Token ids (B, T) -> logits (B, T, vocab) in `dtype`; `vocab_size` is already padded."""

    num_layers: int
    hidden_size: int
    num_heads: int
    seq_length: int
    vocab_size: int
    dtype: Any = jnp.float32
    attention: str | None = None  # jax.nn.dot_product_attention's implementation; see language_model/jax_parts.py

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        tok_emb = nn.Embed(self.vocab_size, self.hidden_size, dtype=self.dtype, embedding_init=normal_init,
                           name="tok_emb")  # fmt: skip
        pos_emb = nn.Embed(self.seq_length, self.hidden_size, dtype=self.dtype, embedding_init=normal_init,
                           name="pos_emb")  # fmt: skip
        x = tok_emb(tokens) + pos_emb(jnp.arange(tokens.shape[1]))
        for i in range(self.num_layers):
            x = Block(self.hidden_size, self.num_heads, self.dtype, self.attention, name=f"layers_{i}")(x)
        return tok_emb.attend(nn.LayerNorm(epsilon=LN_EPS, dtype=self.dtype, name="norm")(x))
