"""The GPT workload's own settings; field names are the YAML keys and (with dashes) the flags."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LR = 1.5e-4  # Megatron's GPT-2 345M recipe


@dataclass(frozen=True)
class GPTConfig:
    case: str | None = None  # a report case name fills the rest; explicit values override it
    num_layers: int = 16
    hidden_size: int = 1536
    num_heads: int = 16
    seq_length: int = 2048
    vocab_size: int = 50257  # GPT-2's; padded to a multiple of 128 x tp inside the model
    dp: int | None = None  # None: world size / (tp x pp)
    tp: int = 1
    pp: int = 1
    micro_batch_size: int = 2
    global_batch_size: int | None = None  # None: micro batch x dp, no accumulation
    pp_schedule: str = "1f1b"
    dp_mode: str = "ddp"
    lr: float | None = None  # None: DEFAULT_LR
    weight_decay: float = 1e-4
