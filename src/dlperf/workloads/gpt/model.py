"""A small GPT decoder: pre-LayerNorm blocks, causal SDPA attention, 4x GELU MLP, learned positions, tied output.

Every part may be absent (None, or layers removed from the ModuleDict) so that a pipeline stage is this same
module with the parts of the other stages deleted; parameter names stay those of the full model. Attention
reads its local head count from the projection's output width, so tensor parallelism needs no flag here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTShape:
    num_layers: int
    hidden_size: int
    num_heads: int
    seq_length: int
    vocab_size: int  # already padded

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


class Attention(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        h = shape.hidden_size
        self.head_dim = shape.head_dim
        self.wq = nn.Linear(h, h)
        self.wk = nn.Linear(h, h)
        self.wv = nn.Linear(h, h)
        self.wo = nn.Linear(h, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, seq, -1, self.head_dim).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x)), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(batch, seq, -1))


class MLP(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.fc_in = nn.Linear(shape.hidden_size, 4 * shape.hidden_size)
        self.fc_out = nn.Linear(4 * shape.hidden_size, shape.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))


class Block(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.attn_norm = nn.LayerNorm(shape.hidden_size)
        self.attn = Attention(shape)
        self.mlp_norm = nn.LayerNorm(shape.hidden_size)
        self.mlp = MLP(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.shape = shape
        self.tok_emb: nn.Embedding | None = nn.Embedding(shape.vocab_size, shape.hidden_size)
        self.pos_emb: nn.Embedding | None = nn.Embedding(shape.seq_length, shape.hidden_size)
        self.layers = nn.ModuleDict({str(i): Block(shape) for i in range(shape.num_layers)})
        self.norm: nn.LayerNorm | None = nn.LayerNorm(shape.hidden_size)
        self.output: nn.Linear | None = nn.Linear(shape.hidden_size, shape.vocab_size, bias=False)
        self.apply(_init_weights)
        self.tie_weights()

    def tie_weights(self) -> None:
        """The output layer shares the token embedding's weight (when this module holds both)."""
        if self.tok_emb is not None and self.output is not None:
            self.output.weight = self.tok_emb.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Token ids -> logits for the full model; a pipeline stage takes/returns hidden states where parts are gone."""
        if self.tok_emb is not None:
            positions = torch.arange(x.shape[1], device=x.device)
            x = self.tok_emb(x) + self.pos_emb(positions)
        for layer in self.layers.values():
            x = layer(x)
        if self.output is not None:
            x = self.output(self.norm(x))
        return x


def _init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation: N(0, 0.02) weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def count_parameters(shape: GPTShape) -> int:
    """Parameters of the full model (tied output counted once), for the MFU script's summary."""
    h, layers = shape.hidden_size, shape.num_layers
    per_layer = 12 * h * h + 13 * h
    return layers * per_layer + (shape.vocab_size + shape.seq_length) * h + 2 * h
