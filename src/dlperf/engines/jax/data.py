"""Synthetic batches as global arrays: sample i is drawn from its own seed (seed, i), so every layout and
process count sees the same global batch while each process generates only the rows its devices hold."""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

Row = Callable[[int], np.ndarray]


def global_batch(mesh: Mesh, steps: int, per_step: int, row: Row, spec: P) -> jax.Array:
    """A (steps, per_step, *row) array, micro-batch s holding samples s*per_step ..., split as `spec` says (e.g.
    the samples over "dp"; a row's own axes, such as its sequence, may be split too)."""
    first = row(0)
    shape = (steps, per_step, *first.shape)

    def fetch(index: tuple[slice, ...]) -> np.ndarray:
        rows = [[row(s * per_step + b) for b in range(per_step)[index[1]]] for s in range(steps)[index[0]]]
        block = np.asarray(rows, dtype=first.dtype).reshape(len(rows), -1, *first.shape)
        return block[(slice(None), slice(None), *index[2:])]

    return jax.make_array_from_callback(shape, NamedSharding(mesh, spec), fetch)
