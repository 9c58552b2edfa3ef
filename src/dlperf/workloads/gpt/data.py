"""GPT training tokens: a fixed random batch, or contiguous windows of a flat token file.

Token file format (`--data PATH`): a headerless array of token ids, little-endian, `uint16` when
--vocab-size is at most 65536 and `uint32` above (the layout nanoGPT's and many tokenizer scripts' `.bin`
files have). Iteration k reads the global batch's samples k*B .. k*B+B-1, sample i being the window of
seq+1 tokens starting at token (i mod windows) * (seq+1); inputs are the first seq tokens, labels the last.
Each data-parallel rank reads only its contiguous slice of the global batch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from dlperf.errors import DataError

CHECK_TOKENS = 1 << 20  # ids checked against the vocabulary before a run starts


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def open_token_file(path: str, vocab_size: int, seq_length: int) -> np.memmap:
    """Map the file read-only; DataError when it is missing, ragged, too short or holds ids >= vocab."""
    dtype = token_dtype(vocab_size)
    file = Path(path)
    if not file.is_file():
        raise DataError(f"token file {path} does not exist: pass --data synthetic or a flat {dtype.name} token file")
    size = file.stat().st_size
    if size % dtype.itemsize:
        raise DataError(
            f"token file {path} has {size} bytes, not a whole number of {dtype.name} ids "
            f"(the id width follows --vocab-size {vocab_size})"
        )
    if size // dtype.itemsize < seq_length + 1:
        raise DataError(f"token file {path} holds fewer than --seq-length + 1 = {seq_length + 1} tokens")
    tokens = np.memmap(file, dtype=dtype, mode="r")
    largest = int(tokens[:CHECK_TOKENS].max())
    if largest >= vocab_size:
        raise DataError(f"token file {path} holds id {largest}, not below --vocab-size {vocab_size}")
    return tokens


Batches = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


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
