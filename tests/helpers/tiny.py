"""The tiny GPT and Llama every test shares (2 layers, hidden 64, 4 heads, 32 tokens, vocabulary 512): as run
keys, as CLI flags, and with a test's own changes. ResNet-50's tiny flags are conftest.TINY."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TINY_GPT_SHAPE = dict(num_layers=2, hidden_size=64, num_heads=4, seq_length=32, vocab_size=512)
# the tiny Llama: the same, with grouped-query attention (2 k/v heads) and a SwiGLU of 128
TINY_LLAMA_SHAPE = dict(TINY_GPT_SHAPE, num_kv_heads=2, ffn_hidden_size=128)
# the tiny MoE: the same, its first block dense, then 4 experts of 32 (top 2) and a shared one, MLA's latent of 32
TINY_MOE_SHAPE = dict(TINY_GPT_SHAPE, num_kv_heads=2, head_dim=16, ffn_hidden_size=128, num_dense_layers=1,
                      num_experts=4, top_k=2, num_shared_experts=1, moe_ffn_hidden_size=32, kv_lora_rank=32,
                      qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)  # fmt: skip
# XLA compiling for the CPU without LLVM's costly passes: compiling is most of a tiny JAX run's time (about half
# of it goes), and both sides of every loss comparison are built by the same compiler
FAST_XLA_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# OpenMP's threads sleeping while they wait, not spinning: the suite's torch processes outnumber 2 cores, and a
# waiting thread that spins takes the core its partner needs to finish (a tiny ResNet-50 run: 37 CPU-seconds with
# spinning, 19 without, at load 13; the same losses)
OMP_PASSIVE = ("OMP_WAIT_POLICY", "PASSIVE")
# a quick timed run on the CPU
QUICK_RUN = dict(warmup_iters=1, iters=4, print_every=2, device="cpu")
# the layout tests' run (tests/helpers/layouts.py, jax_layouts.py): 4 layers, two stages per rank under the
# interleaved pipeline schedules; 4 micro-batches of 2
LAYOUT_RUN = dict(num_layers=4, micro_batch_size=2, global_batch_size=8, device="cpu", lr=1e-3)


def tiny_gpt(**changes: Any) -> dict[str, Any]:
    """The tiny GPT's run keys with `changes` (micro and global batch, layers, lr...)."""
    return {"model": "gpt", **TINY_GPT_SHAPE, **changes}


def tiny_llama(**changes: Any) -> dict[str, Any]:
    """The tiny Llama's run keys with `changes`."""
    return {"model": "llama", **TINY_LLAMA_SHAPE, **changes}


def tiny_moe(**changes: Any) -> dict[str, Any]:
    """The tiny MoE's run keys with `changes`."""
    return {"model": "moe", **TINY_MOE_SHAPE, **changes}


def as_flags(keys: dict[str, Any]) -> list[str]:
    """Run keys as command-line flags (`num_layers` -> `--num-layers 2`)."""
    return [part for key, value in keys.items() for part in (f"--{key.replace('_', '-')}", str(value))]


def tiny_sweep(repeats: int) -> str:
    """A sweep file of one tiny ResNet-50 case on the CPU (1n1g, batch 2, 32 px, 2 timed iterations)."""
    return (
        "model: resnet50\ntopology: [1n1g]\nbatch_size: 2\nimage_size: 32\nnum_classes: 10\ndevice: cpu\n"
        f"warmup_iters: 1\niters: 2\nprint_every: 1\nrepeats: {repeats}\n"
    )


def failing_rank_script(path: Path, word: str, message: str) -> Path:
    """A training script whose rank 1 exits with `message` once rank 0 has printed `rank 0 WORD` (a file beside the
    script says so: else rank 0 could be stopped before its first line, and its log would rightly come back empty);
    rank 0 then sleeps until it is stopped."""
    path.write_text(
        f"import os, pathlib, sys, time\nprint('rank', os.environ['RANK'], {word!r}, flush=True)\n"
        "up = pathlib.Path(__file__).with_name('rank0.up')\n"
        "if os.environ['RANK'] == '0':\n    up.touch()\n"
        "else:\n    deadline = time.time() + 120\n    while not up.exists() and time.time() < deadline:\n"
        f"        time.sleep(0.05)\n    sys.exit({message!r})\ntime.sleep(600)\n"
    )
    return path
