"""Language-model token files, checked before a run starts (numpy only).

Token file format (`--data PATH`): a headerless array of token ids, little-endian, `uint16` when
--vocab-size is at most 65536 and `uint32` above (the layout nanoGPT's and many tokenizer scripts' `.bin`
files have). Iteration k reads the global batch's samples k*B .. k*B+B-1, sample i being the window of
seq+1 tokens starting at token (i mod windows) * (seq+1); inputs are the first seq tokens, labels the last.
Each data-parallel rank reads only its contiguous slice of the global batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dlperf.errors import DataError

if TYPE_CHECKING:
    import numpy as np

CHECK_TOKENS = 1 << 20  # ids checked against the vocabulary before a run starts


def token_dtype(vocab_size: int) -> np.dtype:
    import numpy as np  # only where a token file is used: the CLI starts without it

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
    import numpy as np

    tokens = np.memmap(file, dtype=dtype, mode="r")
    largest = int(tokens[:CHECK_TOKENS].max())
    if largest >= vocab_size:
        raise DataError(f"token file {path} holds id {largest}, not below --vocab-size {vocab_size}")
    return tokens
