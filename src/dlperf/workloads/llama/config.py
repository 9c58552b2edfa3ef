"""The Llama workload's own settings and the Llama 3 sizes by the names the peers use; field names are the YAML
keys and (with dashes) the flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dlperf.spec import setting

DEFAULT_LR = 3e-4  # torchtitan's Llama 3 8B recipe
ADAMW_BETAS = (0.9, 0.95)  # the same recipe's AdamW, on every engine
DEFAULT_WEIGHT_DECAY = 0.1
Size = Literal["debug", "1b", "3b", "8b", "70b", "405b"]
# torch.distributed.pipelining's schedules: one stage per rank (gpipe, 1f1b) or several, looped (interleaved-1f1b,
# interleaved-zb: ScheduleInterleavedZeroBubble) or V-shaped (zbv: ScheduleZBVZeroBubble, two stages per rank)
LlamaSchedule = Literal["gpipe", "1f1b", "interleaved-1f1b", "interleaved-zb", "zbv"]
Checkpointing = Literal["none", "selective", "full"]
MULTI_STAGE_SCHEDULES = ("interleaved-1f1b", "interleaved-zb", "zbv")

# The Llama 3 shapes as Meta publishes them (params.json of Llama 3.1 8B/70B/405B and Llama 3.2 1B/3B; torchtitan's
# llama3 flavors; MaxText's llama3.1-* configs), and torchtitan's debug model. The output layer is untied at every
# size (Meta ties it for 1B and 3B: their parameter count there is vocab x hidden lower than Meta's).
SIZES: dict[str, dict[str, int]] = {
    "debug": dict(num_layers=6, hidden_size=256, num_heads=16, num_kv_heads=16, ffn_hidden_size=768,
                  vocab_size=2000, seq_length=2048),
    "1b": dict(num_layers=16, hidden_size=2048, num_heads=32, num_kv_heads=8, ffn_hidden_size=8192,
               vocab_size=128256, seq_length=8192),
    "3b": dict(num_layers=28, hidden_size=3072, num_heads=24, num_kv_heads=8, ffn_hidden_size=8192,
               vocab_size=128256, seq_length=8192),
    "8b": dict(num_layers=32, hidden_size=4096, num_heads=32, num_kv_heads=8, ffn_hidden_size=14336,
               vocab_size=128256, seq_length=8192),
    "70b": dict(num_layers=80, hidden_size=8192, num_heads=64, num_kv_heads=8, ffn_hidden_size=28672,
                vocab_size=128256, seq_length=8192),
    "405b": dict(num_layers=126, hidden_size=16384, num_heads=128, num_kv_heads=8, ffn_hidden_size=53248,
                 vocab_size=128256, seq_length=8192),
}  # fmt: skip


@dataclass(frozen=True)
class LlamaConfig:
    size: Size = setting("debug", "Llama 3 size (debug: torchtitan's debug model); the shape flags override it")
    num_layers: int = setting(6, "transformer blocks (default: the size's)", bound="positive")
    hidden_size: int = setting(256, "hidden size (default: the size's)", bound="positive")
    num_heads: int = setting(16, "query heads (default: the size's)", bound="positive")
    num_kv_heads: int = setting(16, "key/value heads, grouped-query attention (default: the size's)", bound="positive")
    ffn_hidden_size: int = setting(768, "SwiGLU hidden size (default: the size's)", bound="positive")
    vocab_size: int = setting(2000, "vocabulary (default: the size's; 128256 from 1b on)", bound="positive")
    seq_length: int = setting(2048, "tokens per sample (default: the size's)", bound="positive")
    rope_theta: float = setting(500000.0, "rotary embedding base", bound="positive")
    micro_batch_size: int = setting(1, "samples per micro-batch on each data-parallel rank", bound="positive")
    global_batch_size: int | None = setting(
        None, "samples per iteration (default micro batch x data-parallel size)", bound="positive"
    )
    dp_shard: int | None = setting(
        None, "FSDP2 sharding degree (default: world size / (dp_replicate x cp x tp x pp))", bound="positive"
    )
    dp_replicate: int = setting(1, "replicas of the FSDP2 shards (HSDP when above 1)", bound="positive")
    tp: int = setting(1, "tensor-parallel size (with sequence parallelism)", bound="positive")
    pp: int = setting(1, "pipeline ranks", bound="positive", engines=("torch",))
    pp_schedule: LlamaSchedule = setting("1f1b", "pipeline schedule", engines=("torch",))
    stages_per_rank: int | None = setting(
        None, "pipeline stages per rank (default 2 for interleaved and zbv schedules, else 1)", bound="positive",
        engines=("torch",),
    )  # fmt: skip
    cp: int = setting(1, "context-parallel size: the sequence split over ranks (ring attention)", bound="positive")
    activation_checkpoint: Checkpointing = setting(
        "none",
        "recompute in backward: selective (keeps matmul and attention outputs) or full (each block)",
    )
    float8: bool = setting(False, "float8 linear layers through torchao (CUDA, compute capability 8.9+)",
                           engines=("torch",))  # fmt: skip
    lr: float | None = setting(None, f"learning rate (default {DEFAULT_LR:g})", bound="positive")
    weight_decay: float = setting(DEFAULT_WEIGHT_DECAY, "AdamW weight decay", bound="non-negative")


def parameter_counts(config: LlamaConfig) -> tuple[int, int]:
    """(all parameters, those of the token embedding): per block the q/k/v/o projections (k and v at the
    grouped-query width), the three SwiGLU matrices and two RMSNorm weights; then the final norm, the embedding
    and the untied output layer. No biases."""
    h, layers = config.hidden_size, config.num_layers
    kv_width = config.num_kv_heads * (h // config.num_heads)
    block = 2 * h * h + 2 * h * kv_width + 3 * h * config.ffn_hidden_size + 2 * h
    embedding = config.vocab_size * h
    return layers * block + h + 2 * embedding, embedding
