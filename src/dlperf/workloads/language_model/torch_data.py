"""Language-model training batches in PyTorch, a fixed random batch or contiguous windows of a flat token file
(format: tokens.py), and their next-token loss."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from dlperf.workloads.language_model.tokens import open_token_file

Batches = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The next-token loss in fp32 over every position of the batch."""
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def synthetic_batches(
    global_batch: int, seq_length: int, vocab_size: int, seed: int, rows: slice, device: torch.device
) -> Batches:
    """One random global batch drawn from `seed` (identical for every layout), this rank's rows kept on device."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab_size, (global_batch, seq_length + 1), generator=generator)[rows].to(device)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    return lambda iteration: (inputs, labels)


def file_batches(
    path: str, global_batch: int, seq_length: int, vocab_size: int, rows: slice, device: torch.device
) -> Batches:
    """Iteration k's rows of contiguous seq+1 windows, copied to the device."""
    tokens = open_token_file(path, vocab_size, seq_length)
    window = seq_length + 1
    windows = len(tokens) // window
    pin = device.type == "cuda"

    def batch(iteration: int) -> tuple[torch.Tensor, torch.Tensor]:
        first = iteration * global_batch
        samples = [(first + i) % windows for i in range(global_batch)[rows]]
        host = torch.from_numpy(np.stack([tokens[s * window : (s + 1) * window] for s in samples]).astype(np.int64))
        if pin:
            host = host.pin_memory()
        data = host.to(device, non_blocking=pin)
        return data[:, :-1], data[:, 1:]

    return batch
