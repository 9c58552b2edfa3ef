"""The MoE workload's own settings and the published mixture-of-experts shapes by the names the peers use; torch-free
(the JAX engine's MoE imports it too). Field names are the YAML keys and (with dashes) the flags.

The config is Llama's (its layout fields, batches, optimizer) with the MoE feed-forward and the attention choice added:
the layout machinery (`workloads/llama/layout.py`) reads it as it reads a Llama config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dlperf.spec import setting
from dlperf.workloads.llama.config import LlamaConfig

Size = Literal[
    "debug", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b", "mixtral-8x22b", "gpt-oss-20b",
    "gpt-oss-120b", "kimi-k2",
]  # fmt: skip
AttentionKind = Literal["gqa", "mla"]
ScoreFunc = Literal["softmax", "sigmoid"]
Routing = Literal["learned", "balanced"]
LoadBalance = Literal["bias", "aux", "none"]
ExpertsImpl = Literal["auto", "grouped", "loop"]
BIAS_UPDATE_RATE = 1e-3  # torchtitan's aux-loss-free expert-bias step (DeepSeek-V3's gamma)
DEFAULT_AUX_LOSS_COEF = 1e-3  # Megatron-Core's moe_aux_loss_coeff in its Mixtral and Qwen3 recipes

_GQA = dict(attention="gqa", q_lora_rank=0, kv_lora_rank=0, qk_nope_head_dim=0, qk_rope_head_dim=0, v_head_dim=0)
_DEEPSEEK_MLA = dict(attention="mla", q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                     v_head_dim=128)  # fmt: skip

# Each size's shape as published. Sources: torchtitan's `deepseekv3_args["debugmodel"]`
# (torchtitan/models/deepseek_v3/__init__.py); the Hugging Face hub's config.json of Qwen/Qwen3-30B-A3B and
# Qwen/Qwen3-235B-A22B (HF transformers' Qwen3MoeConfig keys: moe_intermediate_size, num_experts,
# num_experts_per_tok, norm_topk_prob, head_dim 128), deepseek-ai/DeepSeek-V3 (first_k_dense_replace 3,
# n_routed_experts 256, n_shared_experts 1, q_lora_rank 1536, kv_lora_rank 512, scoring_func sigmoid,
# routed_scaling_factor 2.5; Megatron-Bridge's deepseek_v3 recipe agrees), mistralai/Mixtral-8x7B-v0.1 and
# Mixtral-8x22B-v0.1 (num_local_experts 8, top 2), openai/gpt-oss-20b and gpt-oss-120b (hidden 2880, head_dim 64,
# intermediate_size 2880, num_local_experts 32 / 128, top 4, vocab 201088), moonshotai/Kimi-K2-Base (DeepSeek-V3's
# architecture with 384 experts, 64 heads, first_k_dense_replace 1, vocab 163840, routed_scaling_factor 2.827).
# Not built (each is below the cards' precision in the parameter counts; docs/moe.md): Qwen3's per-head q/k norms,
# gpt-oss's attention biases and sinks, expert biases, clamped SwiGLU and alternating sliding window, DeepSeek's
# group-limited routing (n_group) and multi-token-prediction module (not in the 671B count either).
SIZES: dict[str, dict] = {
    "debug": dict(num_layers=6, num_dense_layers=1, hidden_size=256, num_heads=16, num_kv_heads=16, head_dim=16,
                  ffn_hidden_size=1024, moe_ffn_hidden_size=256, num_experts=8, top_k=3, num_shared_experts=2,
                  score_func="softmax", route_norm=False, route_scale=1.0, vocab_size=2048, seq_length=2048,
                  rope_theta=10000.0, **{**_DEEPSEEK_MLA, "q_lora_rank": 0}),
    "qwen3-30b-a3b": dict(num_layers=48, num_dense_layers=0, hidden_size=2048, num_heads=32, num_kv_heads=4,
                          head_dim=128, ffn_hidden_size=6144, moe_ffn_hidden_size=768, num_experts=128, top_k=8,
                          num_shared_experts=0, score_func="softmax", route_norm=True, route_scale=1.0,
                          vocab_size=151936, seq_length=4096, rope_theta=1000000.0, **_GQA),
    "qwen3-235b-a22b": dict(num_layers=94, num_dense_layers=0, hidden_size=4096, num_heads=64, num_kv_heads=4,
                            head_dim=128, ffn_hidden_size=12288, moe_ffn_hidden_size=1536, num_experts=128, top_k=8,
                            num_shared_experts=0, score_func="softmax", route_norm=True, route_scale=1.0,
                            vocab_size=151936, seq_length=4096, rope_theta=1000000.0, **_GQA),
    "deepseek-v3": dict(num_layers=61, num_dense_layers=3, hidden_size=7168, num_heads=128, num_kv_heads=128,
                        head_dim=128, ffn_hidden_size=18432, moe_ffn_hidden_size=2048, num_experts=256, top_k=8,
                        num_shared_experts=1, score_func="sigmoid", route_norm=True, route_scale=2.5,
                        vocab_size=129280, seq_length=4096, rope_theta=10000.0, **_DEEPSEEK_MLA),
    "mixtral-8x7b": dict(num_layers=32, num_dense_layers=0, hidden_size=4096, num_heads=32, num_kv_heads=8,
                         head_dim=128, ffn_hidden_size=14336, moe_ffn_hidden_size=14336, num_experts=8, top_k=2,
                         num_shared_experts=0, score_func="softmax", route_norm=True, route_scale=1.0,
                         vocab_size=32000, seq_length=4096, rope_theta=1000000.0, **_GQA),
    "mixtral-8x22b": dict(num_layers=56, num_dense_layers=0, hidden_size=6144, num_heads=48, num_kv_heads=8,
                          head_dim=128, ffn_hidden_size=16384, moe_ffn_hidden_size=16384, num_experts=8, top_k=2,
                          num_shared_experts=0, score_func="softmax", route_norm=True, route_scale=1.0,
                          vocab_size=32768, seq_length=4096, rope_theta=1000000.0, **_GQA),
    "gpt-oss-20b": dict(num_layers=24, num_dense_layers=0, hidden_size=2880, num_heads=64, num_kv_heads=8,
                        head_dim=64, ffn_hidden_size=2880, moe_ffn_hidden_size=2880, num_experts=32, top_k=4,
                        num_shared_experts=0, score_func="softmax", route_norm=True, route_scale=1.0,
                        vocab_size=201088, seq_length=4096, rope_theta=150000.0, **_GQA),
    "gpt-oss-120b": dict(num_layers=36, num_dense_layers=0, hidden_size=2880, num_heads=64, num_kv_heads=8,
                         head_dim=64, ffn_hidden_size=2880, moe_ffn_hidden_size=2880, num_experts=128, top_k=4,
                         num_shared_experts=0, score_func="softmax", route_norm=True, route_scale=1.0,
                         vocab_size=201088, seq_length=4096, rope_theta=150000.0, **_GQA),
    "kimi-k2": dict(num_layers=61, num_dense_layers=1, hidden_size=7168, num_heads=64, num_kv_heads=64,
                    head_dim=128, ffn_hidden_size=18432, moe_ffn_hidden_size=2048, num_experts=384, top_k=8,
                    num_shared_experts=1, score_func="sigmoid", route_norm=True, route_scale=2.827,
                    vocab_size=163840, seq_length=4096, rope_theta=50000.0, **_DEEPSEEK_MLA),
}  # fmt: skip


@dataclass(frozen=True)
class MoEConfig(LlamaConfig):
    size: Size = setting("debug", "MoE size (debug: torchtitan's deepseek_v3 debug model); the shape flags override it")
    num_heads: int = setting(16, "query heads (default: the size's)", bound="positive")
    num_kv_heads: int = setting(16, "key/value heads of grouped-query attention (default: the size's)",
                                bound="positive")  # fmt: skip
    ffn_hidden_size: int = setting(1024, "SwiGLU hidden size of the dense blocks (default: the size's)",
                                   bound="positive")  # fmt: skip
    vocab_size: int = setting(2048, "vocabulary (default: the size's)", bound="positive")
    rope_theta: float = setting(10000.0, "rotary embedding base (default: the size's)", bound="positive")
    head_dim: int = setting(16, "head size of grouped-query attention (default: the size's)", bound="positive")
    num_dense_layers: int = setting(1, "the first blocks with a dense feed-forward (default: the size's)",
                                    bound="non-negative")  # fmt: skip
    moe_ffn_hidden_size: int = setting(256, "SwiGLU hidden size of each expert (default: the size's)",
                                       bound="positive")  # fmt: skip
    num_experts: int = setting(8, "routed experts per MoE block (default: the size's)", bound="positive")
    top_k: int = setting(3, "routed experts per token (default: the size's)", bound="positive")
    num_shared_experts: int = setting(2, "shared experts every token passes (default: the size's)",
                                      bound="non-negative")  # fmt: skip
    score_func: ScoreFunc = setting("softmax", "router scores (default: the size's; DeepSeek-V3: sigmoid)")
    route_norm: bool = setting(False, "normalise the top-k scores to sum to 1 (default: the size's)")
    route_scale: float = setting(1.0, "scale of the routed experts' output (default: the size's)", bound="positive")
    attention: AttentionKind = setting("mla", "gqa (grouped-query) or mla (DeepSeek's multi-head latent attention)")
    q_lora_rank: int = setting(0, "MLA's query rank (0: a full query projection)", bound="non-negative")
    kv_lora_rank: int = setting(512, "MLA's key/value latent rank", bound="non-negative")
    qk_nope_head_dim: int = setting(128, "MLA's query/key head size without rotary", bound="non-negative")
    qk_rope_head_dim: int = setting(64, "MLA's query/key head size with rotary", bound="non-negative")
    v_head_dim: int = setting(128, "MLA's value head size", bound="non-negative")
    routing: Routing = setting(
        "learned", "learned (the router's top-k) or balanced (tokens spread evenly over the experts by construction, "
        "as NVIDIA's published MoE tables run)",
    )  # fmt: skip
    load_balance: LoadBalance = setting(
        "bias", "the learned router's balancing: bias (torchtitan's aux-loss-free expert bias), aux (an auxiliary "
        "loss, --aux-loss-coef) or none",
    )  # fmt: skip
    aux_loss_coef: float = setting(DEFAULT_AUX_LOSS_COEF, "coefficient of the load-balancing loss (--load-balance aux)",
                                   bound="non-negative")  # fmt: skip
    capacity_factor: float | None = setting(
        None, "tokens an expert takes, as a multiple of its even share; beyond it they are dropped and counted "
        "(default: dropless)", bound="positive",
    )  # fmt: skip
    experts_impl: ExpertsImpl = setting("auto", "experts as grouped GEMMs (torch._grouped_mm), a per-expert loop, or "
                                        "auto (grouped where the torch has it)", engines=("torch",))  # fmt: skip
    ep: int = setting(1, "expert-parallel size, folded inside dp_shard x cp (experts sharded over it)",
                      bound="positive")  # fmt: skip


@dataclass(frozen=True)
class ParameterCounts:
    total: int  # every parameter: embedding, blocks, final norm, untied output layer
    active: int  # those one token's forward uses: the routed experts counted top_k times, not num_experts
    embedding: int  # the input embedding's table (vocab x hidden), which some model cards leave out of `active`


def attention_parameters(config: MoEConfig) -> int:
    """One block's attention: GQA's q/k/v/o at the grouped-query width, or MLA's low-rank query (or a full one at
    q_lora_rank 0), the shared key/value latent with its rotary key, their RMSNorms, the latent's up-projection to
    per-head keys and values, and the output projection. No biases."""
    h, heads = config.hidden_size, config.num_heads
    if config.attention == "gqa":
        return 2 * h * heads * config.head_dim + 2 * h * config.num_kv_heads * config.head_dim
    qk = config.qk_nope_head_dim + config.qk_rope_head_dim
    rank = config.q_lora_rank
    query = h * heads * qk if rank == 0 else h * rank + rank + rank * heads * qk
    latent = h * (config.kv_lora_rank + config.qk_rope_head_dim) + config.kv_lora_rank
    up = config.kv_lora_rank * heads * (config.qk_nope_head_dim + config.v_head_dim)
    return query + latent + up + heads * config.v_head_dim * h


def parameter_counts(config: MoEConfig) -> ParameterCounts:
    """Total and active parameters: per block attention and two norms, then a dense SwiGLU (the first
    num_dense_layers) or the router, the routed experts and the shared experts (each SwiGLU of moe_ffn_hidden_size);
    the final norm, the embedding and the untied output layer. The router's expert bias is a buffer, not counted."""
    h = config.hidden_size
    block = attention_parameters(config) + 2 * h
    expert = 3 * h * config.moe_ffn_hidden_size
    dense = config.num_dense_layers
    sparse = config.num_layers - dense
    embedding = config.vocab_size * h
    common = dense * (block + 3 * h * config.ffn_hidden_size) + h + 2 * embedding
    moe_block = block + h * config.num_experts + expert * config.num_shared_experts
    return ParameterCounts(
        total=common + sparse * (moe_block + expert * config.num_experts),
        active=common + sparse * (moe_block + expert * config.top_k),
        embedding=embedding,
    )
