"""Peak memory of one rank: CUDA allocator peaks on GPUs, the process's peak RSS on CPUs."""

from __future__ import annotations

import resource
import sys

import torch

MIB = 1024 * 1024


def reset_peak(device: torch.device) -> None:
    """Start the peaks afresh. `reset_peak_memory_stats` sets the reserved peak to what the allocator holds now,
    and the cache still holds the warm-up's blocks (cuDNN benchmarking's and autotuning's workspaces, the first
    step's temporaries): released first, so that the reserved peak is what the timed steps need (and what
    `dlperf maxbatch` sizes batches from)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mib(device: torch.device) -> dict[str, float]:
    """`allocated`/`reserved` on CUDA; `rss` on the CPU (ru_maxrss is KiB on Linux, bytes on macOS)."""
    if device.type == "cuda":
        return {
            "allocated": torch.cuda.max_memory_allocated(device) / MIB,
            "reserved": torch.cuda.max_memory_reserved(device) / MIB,
        }
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024
    return {"rss": maxrss * scale / MIB}
