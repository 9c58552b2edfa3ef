"""Host syncs per training step on CUDA: every time the host waits for the device inside a step, the queue drains
and the GPU idles while Python catches up. dlperf's steps are meant to have none (the loss is read at window
edges only); this counts them with PyTorch's sync debug mode, which warns at each synchronizing call.

No run path calls it, and that is on purpose: it is the GPU validation's check (benchmarks/gpu_validate.py and the
CUDA tests) that the steps keep no host sync, run on real devices, where such faults show."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch


def host_syncs_per_step(run_step: Callable[[], Any], steps: int = 5) -> tuple[float, str | None]:
    """(synchronizing calls per step, the first one's message) over `steps` steps after the caller's warm-up."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                run_step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    # the mode's own "prototype feature" warning on first use is no sync: only the per-call warning counts
    syncs = [str(w.message) for w in caught if "called a synchronizing CUDA operation" in str(w.message)]
    return len(syncs) / steps, (syncs[0] if syncs else None)
