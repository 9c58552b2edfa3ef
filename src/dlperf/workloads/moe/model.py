"""The MoE decoder in PyTorch: Llama's blocks (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, untied
output; imported from workloads/llama/model.py) with DeepSeek's multi-head latent attention as the other attention
and a mixture-of-experts feed-forward after the first `num_dense_layers` blocks; module names follow torchtitan's.

The MoE block routes each token to its top-k experts (softmax or sigmoid scores, optionally normalised and scaled,
DeepSeek's way; the selection may add torchtitan's aux-loss-free expert bias) or, under `balanced`, spreads the
tokens evenly over the experts by construction; shared experts see every token. Tokens are sorted by expert and the
experts run as one grouped GEMM (`torch._grouped_mm`) or a per-expert loop. Each MoE block counts the tokens it
sends to each expert and those a capacity factor dropped, for the bias update and the record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from dlperf.workloads.llama import model as llama
from dlperf.workloads.llama.model import NORM_EPS, Attention, FeedForward, rotate


@dataclass(frozen=True)
class MoEShape:
    num_layers: int
    num_dense_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_hidden_size: int
    moe_ffn_hidden_size: int
    num_experts: int
    top_k: int
    num_shared_experts: int
    vocab_size: int
    seq_length: int
    rope_theta: float
    attention: str = "gqa"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    def rotary(self) -> MoEShape:
        """The shape whose head_dim is the rotated part's (MLA rotates qk_rope_head_dim of each head only)."""
        return self if self.attention == "gqa" else replace(self, head_dim=self.qk_rope_head_dim)


@dataclass(frozen=True)
class Routing:
    """How a MoE block picks and weighs experts (config.py's routing fields)."""

    score_func: str = "softmax"
    route_norm: bool = False
    route_scale: float = 1.0
    balanced: bool = False
    expert_bias: bool = True
    aux_loss_coef: float = 0.0
    capacity_factor: float | None = None
    grouped: bool = True


class LatentAttention(nn.Module):
    """DeepSeek-V2/V3's multi-head latent attention: queries through a low-rank projection (or a full one at
    q_lora_rank 0), keys and values from one shared latent of kv_lora_rank, each head's key a no-rotary part from
    the latent and one rotary part shared by all heads. The local head count comes from the output widths."""

    def __init__(self, shape: MoEShape) -> None:
        super().__init__()
        h, heads = shape.hidden_size, shape.num_heads
        self.nope, self.rope, self.v_dim = shape.qk_nope_head_dim, shape.qk_rope_head_dim, shape.v_head_dim
        qk = self.nope + self.rope
        if shape.q_lora_rank == 0:
            self.wq = nn.Linear(h, heads * qk, bias=False)
        else:
            self.wq_a = nn.Linear(h, shape.q_lora_rank, bias=False)
            self.q_norm = nn.RMSNorm(shape.q_lora_rank, eps=NORM_EPS)
            self.wq_b = nn.Linear(shape.q_lora_rank, heads * qk, bias=False)
        self.wkv_a = nn.Linear(h, shape.kv_lora_rank + self.rope, bias=False)
        self.kv_norm = nn.RMSNorm(shape.kv_lora_rank, eps=NORM_EPS)
        self.wkv_b = nn.Linear(shape.kv_lora_rank, heads * (self.nope + self.v_dim), bias=False)
        self.wo = nn.Linear(heads * self.v_dim, h, bias=False)

    def query(self, x: torch.Tensor) -> torch.Tensor:
        return self.wq(x) if hasattr(self, "wq") else self.wq_b(self.q_norm(self.wq_a(x)))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = self.query(x).view(batch, seq, -1, self.nope + self.rope)
        q_nope, q_rope = q.split((self.nope, self.rope), dim=-1)
        latent, k_rope = self.wkv_a(x).split((self.kv_norm.normalized_shape[0], self.rope), dim=-1)
        kv = self.wkv_b(self.kv_norm(latent)).view(batch, seq, -1, self.nope + self.v_dim)
        k_nope, v = kv.split((self.nope, self.v_dim), dim=-1)
        k_rope = rotate(_local(k_rope).unsqueeze(2), cos, sin).expand(-1, -1, kv.shape[2], -1)
        q = torch.cat((q_nope, rotate(q_rope, cos, sin)), dim=-1)
        k = torch.cat((k_nope, k_rope), dim=-1)
        # values padded with zeros to the query/key width and the output cut back: the same attention, through the
        # fused kernels that want one head size (the CPU's flash kernel, which context parallelism's ring runs)
        v = F.pad(v, (0, max(0, q.shape[-1] - self.v_dim)))
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out[..., : self.v_dim].transpose(1, 2).reshape(batch, seq, -1))


def _local(t: torch.Tensor) -> torch.Tensor:
    """The shared rotary key, replicated over the tensor-parallel ranks, as this rank's plain tensor; each rank's
    gradient is its own heads' share (Partial), summed in backward."""
    if not hasattr(t, "to_local"):
        return t
    from torch.distributed.tensor import Partial

    return t.to_local(grad_placements=[Partial()])


def _contiguous_grad(t: torch.Tensor) -> torch.Tensor:
    """grouped_mm's backward refuses a stride-0 (expanded) gradient, as `out.sum().backward()` gives: copy it."""
    if t.requires_grad:
        t.register_hook(lambda grad: grad.contiguous())
    return t


def grouped_mm(x: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Rows of x (sorted by expert, group g ending at offsets[g]) times their expert's matrix, one kernel."""
    mm = getattr(F, "grouped_mm", None) or torch._grouped_mm
    kind = x.device.type
    dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype
    return _contiguous_grad(mm(x.to(dtype), weight.to(dtype), offs=offsets))


def has_grouped_mm() -> bool:
    return hasattr(F, "grouped_mm") or hasattr(torch, "_grouped_mm")


class _ScaleGrad(torch.autograd.Function):
    """The identity, its gradient scaled."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


class GroupedExperts(nn.Module):
    """`num_experts` SwiGLU experts as stacked weights (experts, in, out); under expert parallelism this rank holds
    a slice of them (the first dimension)."""

    def __init__(self, shape: MoEShape, experts: int) -> None:
        super().__init__()
        self.grad_scale = 1.0  # expert parallelism's correction of the data-parallel average (parallel.py)
        h, f = shape.hidden_size, shape.moe_ffn_hidden_size
        self.w1 = nn.Parameter(torch.empty(experts, h, f))
        self.w2 = nn.Parameter(torch.empty(experts, f, h))
        self.w3 = nn.Parameter(torch.empty(experts, h, f))

    def forward(self, x: torch.Tensor, counts: torch.Tensor, grouped: bool) -> torch.Tensor:
        """x: rows sorted by expert, counts[e] of them for local expert e."""
        w1, w2, w3 = (w.to_local() if hasattr(w, "to_local") else w for w in (self.w1, self.w2, self.w3))
        if self.grad_scale != 1.0:
            w1, w2, w3 = (_ScaleGrad.apply(w, self.grad_scale) for w in (w1, w2, w3))
        if grouped:
            offsets = counts.cumsum(0).to(torch.int32)
            hidden = F.silu(grouped_mm(x, w1, offsets)) * grouped_mm(x, w3, offsets)
            return grouped_mm(hidden, w2, offsets)
        parts = x.split(counts.tolist())
        return torch.cat([(F.silu(p @ w1[e]) * (p @ w3[e])) @ w2[e] for e, p in enumerate(parts)])


class Router(nn.Module):
    def __init__(self, shape: MoEShape, routing: Routing) -> None:
        super().__init__()
        self.gate = nn.Linear(shape.hidden_size, shape.num_experts, bias=False)
        self.top_k, self.routing = shape.top_k, routing
        # torchtitan's aux-loss-free balancing: added to the scores for the selection only, moved after each step
        self.register_buffer("expert_bias", torch.zeros(shape.num_experts), persistent=False)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(expert ids, their weights), both (tokens, top_k), and the fp32 scores (tokens, experts)."""
        logits = self.gate(tokens).float()
        scores = logits.softmax(-1) if self.routing.score_func == "softmax" else logits.sigmoid()
        if self.routing.balanced:  # token i's j-th choice is expert (i * k + j) mod E: each expert an equal share
            picks = torch.arange(tokens.shape[0] * self.top_k, device=tokens.device).view(-1, self.top_k)
            ids = picks % scores.shape[1]
        else:
            chosen = scores + self.expert_bias if self.routing.expert_bias else scores
            ids = chosen.topk(self.top_k, dim=-1).indices
        weights = scores.gather(1, ids)
        if self.routing.route_norm:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return ids, weights * self.routing.route_scale, scores


class MoE(nn.Module):
    """The routed experts and the shared ones. `tokens_per_expert` and `dropped` accumulate (no grad) over steps
    until the owner reads and resets them."""

    def __init__(self, shape: MoEShape, routing: Routing) -> None:
        super().__init__()
        self.num_experts, self.top_k, self.routing = shape.num_experts, shape.top_k, routing
        self.router = Router(shape, routing)
        self.experts = GroupedExperts(shape, shape.num_experts)
        shared = shape.num_shared_experts * shape.moe_ffn_hidden_size
        self.shared_experts = FeedForward(replace(shape, ffn_hidden_size=shared)) if shared else None
        self.register_buffer("tokens_per_expert", torch.zeros(shape.num_experts), persistent=False)
        self.register_buffer("dropped", torch.zeros(()), persistent=False)
        self.dispatcher = None  # expert parallelism's all-to-all (parallel.py); None: every expert is local

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, x.shape[-1])
        ids, weights, scores = self.router(tokens)
        flat = ids.flatten()
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=self.num_experts)
        order, counts = self._capacity(order, counts, tokens.shape[0])
        rows = order // self.top_k
        routed = self._experts(tokens[rows], counts)
        out = torch.zeros_like(tokens).index_add_(0, rows, routed * weights.flatten()[order, None].to(routed.dtype))
        if self.shared_experts is not None:
            out = out + self.shared_experts(tokens)
        self._account(counts, flat.numel() - order.numel())
        if self.routing.aux_loss_coef and self.training:
            out = _AttachLoss.apply(out, self._aux_loss(scores, ids))
        return out.view_as(x)

    def _experts(self, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        if self.dispatcher is not None:
            return self.dispatcher(self.experts, rows, counts, self.routing.grouped)
        return self.experts(rows, counts, self.routing.grouped)

    def _capacity(self, order: torch.Tensor, counts: torch.Tensor, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Without a capacity factor, every pick; with one, each expert's first `capacity` picks (token order)."""
        if self.routing.capacity_factor is None:
            return order, counts
        capacity = math.ceil(self.routing.capacity_factor * tokens * self.top_k / self.num_experts)
        starts = counts.cumsum(0) - counts
        expert = torch.repeat_interleave(torch.arange(self.num_experts, device=counts.device), counts)
        keep = torch.arange(order.numel(), device=order.device) - starts[expert] < capacity
        return order[keep], counts.clamp(max=capacity)

    def _account(self, counts: torch.Tensor, dropped: int) -> None:
        """The step's counts, for the record and the bias update. Activation checkpointing's recompute in backward
        stops once the block's output is recomputed (torch's early stop), before this: each pick counts once."""
        with torch.no_grad():
            self.tokens_per_expert += counts.float()
            self.dropped += dropped

    def _aux_loss(self, scores: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The Switch Transformer's load-balancing loss, coef x E x sum_e f_e P_e (f: the share of picks to expert e,
        P: its mean normalised score), as Megatron-Core's `aux_loss` type computes it."""
        share = torch.bincount(ids.flatten(), minlength=self.num_experts).float() / ids.numel()
        probability = (scores / scores.sum(-1, keepdim=True)).mean(0)
        return self.routing.aux_loss_coef * self.num_experts * (share * probability).sum()


class _AttachLoss(torch.autograd.Function):
    """Megatron-Core's MoEAuxLossAutoScaler: the block's output unchanged, the auxiliary loss's own gradient (1)
    started in backward, so the loss the step reads stays the language model's."""

    @staticmethod
    def forward(ctx, out: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        (aux,) = ctx.saved_tensors
        return grad, torch.ones_like(aux)


def block(shape: MoEShape, routing: Routing, layer: int) -> llama.Block:
    """Llama's block with the attention of the shape's choice and a MoE feed-forward past the dense blocks."""
    attention = Attention(shape) if shape.attention == "gqa" else LatentAttention(shape)
    return llama.Block(shape, attention, MoE(shape, routing) if layer >= shape.num_dense_layers else FeedForward(shape))


class MoETransformer(llama.Llama):
    """Llama's decoder (its forward, stage split and weight drawing) of MoE blocks, its rotary tables the rotated
    part's."""

    def __init__(self, shape: MoEShape, routing: Routing) -> None:
        super().__init__(shape.rotary(), lambda layer: block(shape, routing, layer))

    def moe_blocks(self) -> dict[int, MoE]:
        """This stage's MoE feed-forwards by layer."""
        return {int(name): block.feed_forward for name, block in self.blocks() if isinstance(block.feed_forward, MoE)}

    def blocks(self) -> list[tuple[str, llama.Block]]:
        """(name, block) with activation checkpointing's wrapper looked through."""
        return [(name, getattr(layer, "_checkpoint_wrapped_module", layer)) for name, layer in self.layers.items()]
