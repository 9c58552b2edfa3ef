"""The GPT workload's own settings; field names are the YAML keys and (with dashes) the flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dlperf.spec import setting

DEFAULT_LR = 1.5e-4  # Megatron's GPT-2 345M recipe
ADAMW_BETAS = (0.9, 0.95)  # the same recipe's AdamW, on every engine
PPSchedule = Literal["gpipe", "1f1b"]
DPMode = Literal["ddp", "fsdp"]


@dataclass(frozen=True)
class GPTConfig:
    case: str | None = setting(
        None, "a GPT report case, e.g. DP_8x1x1_16_1536x16 or its log name; other flags override it"
    )
    num_layers: int = setting(16, "transformer blocks", bound="positive")
    hidden_size: int = setting(1536, "hidden size", bound="positive")
    num_heads: int = setting(16, "attention heads", bound="positive")
    seq_length: int = setting(2048, "tokens per sample", bound="positive")
    vocab_size: int = setting(50257, "vocabulary (GPT-2's), padded to 128 x tp inside the model", bound="positive")
    dp: int | None = setting(None, "data-parallel size (default: world size / (tp x pp))", bound="positive")
    tp: int = setting(1, "tensor-parallel size", bound="positive")
    pp: int = setting(1, "pipeline stages", bound="positive")
    micro_batch_size: int = setting(2, "samples per micro-batch", bound="positive")
    global_batch_size: int | None = setting(
        None, "samples per iteration (default micro batch x dp, no accumulation)", bound="positive"
    )
    pp_schedule: PPSchedule = setting("1f1b", "pipeline schedule")
    dp_mode: DPMode = setting("ddp", "data parallelism: DDP or FSDP2", engines=("torch",))
    lr: float | None = setting(None, f"learning rate (default {DEFAULT_LR:g})", bound="positive")
    weight_decay: float = setting(1e-4, "AdamW weight decay", bound="non-negative")
