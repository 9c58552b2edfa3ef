"""The Llama 3 decoder in PyTorch: RMSNorm, rotary embeddings on adjacent pairs (Meta's complex form, in reals),
grouped-query attention through causal SDPA, SwiGLU feed-forward, untied output; module names follow torchtitan's.

Every part may be absent (None, or layers removed from the ModuleDict) so that a pipeline stage is this same module
with the parts of the other stages deleted; parameter names stay those of the full model. Weights are drawn per
parameter from a generator seeded by the run's seed and the parameter's name, so every layout and stage split
starts from the same model without ever building the whole of it on one rank. Attention reads its local head counts
from the projections' output widths, so tensor parallelism needs no flag here.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

INIT_STD = 0.02
NORM_EPS = 1e-5


@dataclass(frozen=True)
class LlamaShape:
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    vocab_size: int
    seq_length: int
    rope_theta: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


def rope_tables(shape: LlamaShape, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position x frequency, (seq, head_dim / 2), in fp32."""
    half = shape.head_dim // 2
    freqs = 1.0 / shape.rope_theta ** (torch.arange(half, device=device, dtype=torch.float32) * 2 / shape.head_dim)
    angles = torch.outer(torch.arange(shape.seq_length, device=device, dtype=torch.float32), freqs)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent pair (2i, 2i+1) of x (batch, seq, heads, head_dim) by its position's angle."""
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[:, None, :], sin[:, None, :]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        h, d = shape.hidden_size, shape.head_dim
        self.head_dim = d
        self.wq = nn.Linear(h, shape.num_heads * d, bias=False)
        self.wk = nn.Linear(h, shape.num_kv_heads * d, bias=False)
        self.wv = nn.Linear(h, shape.num_kv_heads * d, bias=False)
        self.wo = nn.Linear(shape.num_heads * d, h, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = (proj(x).view(batch, seq, -1, self.head_dim) for proj in (self.wq, self.wk, self.wv))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        repeats = q.shape[2] // k.shape[2]  # grouped-query attention: each k/v head serves `repeats` query heads
        k, v = (t.repeat_interleave(repeats, dim=2) for t in (k, v))
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.w1 = nn.Linear(shape.hidden_size, shape.ffn_hidden_size, bias=False)
        self.w2 = nn.Linear(shape.ffn_hidden_size, shape.hidden_size, bias=False)
        self.w3 = nn.Linear(shape.hidden_size, shape.ffn_hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """Llama's block; the MoE workload's gives its own attention and feed-forward."""

    def __init__(self, shape: LlamaShape, attention: nn.Module | None = None, feed_forward: nn.Module | None = None):
        super().__init__()
        self.attention_norm = nn.RMSNorm(shape.hidden_size, eps=NORM_EPS)
        self.attention = attention or Attention(shape)
        self.ffn_norm = nn.RMSNorm(shape.hidden_size, eps=NORM_EPS)
        self.feed_forward = feed_forward or FeedForward(shape)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """`block(layer)` makes each block (default: Llama's); `shape` is the rotary part's, which `materialize` redraws
    the tables from."""

    def __init__(self, shape: LlamaShape, block: Callable[[int], nn.Module] | None = None) -> None:
        super().__init__()
        self.shape = shape
        self.tok_embeddings: nn.Embedding | None = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.layers = nn.ModuleDict({str(i): (block or (lambda _: Block(shape)))(i) for i in range(shape.num_layers)})
        self.norm: nn.RMSNorm | None = nn.RMSNorm(shape.hidden_size, eps=NORM_EPS)
        self.output: nn.Linear | None = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)
        cos, sin = rope_tables(shape)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids -> logits for the full model; a pipeline stage takes/returns hidden states where parts are gone."""
        if self.tok_embeddings is not None:
            x = self.tok_embeddings(x)
        for layer in self.layers.values():
            x = layer(x, self.rope_cos, self.rope_sin)
        if self.output is not None:
            x = self.output(self.norm(x))
        return x


def keep_stage(model: Llama, layers: range, first: bool, last: bool) -> None:
    """Delete what other stages hold: the embedding lives on the first, the final norm and output on the last."""
    for name in list(model.layers):
        if int(name) not in layers:
            del model.layers[name]
    if not first:
        model.tok_embeddings = None
    if not last:
        model.norm = model.output = None


def materialize(model: Llama, device: torch.device, seed: int) -> None:
    """Give a meta-device model, already split by TP and sharded by FSDP as planned, its storage on `device` and
    draw its weights: N(0, 0.02) for every matrix and embedding, ones for the norms, each from a generator seeded by
    (seed, the parameter's name). A split parameter is drawn whole, one at a time, and the rank keeps its part, so
    every layout starts from the same values while no rank holds more than its shards and one whole parameter
    (a 70B stage is never built unsharded). Buffers (`to_empty` leaves them undefined) start at zero: the MoE
    routers' counters and expert biases."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import _CHECKPOINT_PREFIX
    from torch.distributed.tensor import DTensor, distribute_tensor

    model.to_empty(device=device)
    with torch.no_grad():
        for buffer in model.buffers():
            buffer.zero_()
        for wrapped_name, parameter in model.named_parameters():
            name = wrapped_name.replace(_CHECKPOINT_PREFIX, "")  # the name in the unwrapped model seeds it
            split = isinstance(parameter, DTensor)
            local = parameter.to_local() if split else parameter
            if name.endswith("norm.weight"):
                local.fill_(1.0)
                continue
            generator = torch.Generator(device=device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
            if not split:  # the whole parameter is this rank's: drawn in place
                local.normal_(0.0, INIT_STD, generator=generator)
                continue
            whole = torch.empty(parameter.shape, dtype=parameter.dtype, device=device)
            whole.normal_(0.0, INIT_STD, generator=generator)
            # this rank's part, cut locally (src_data_rank=None: every rank drew the same whole)
            part = distribute_tensor(whole, parameter.device_mesh, parameter.placements, src_data_rank=None)
            local.copy_(part.to_local())
        model.rope_cos, model.rope_sin = rope_tables(model.shape, device)
