"""What the JAX MoE's routers did, measured: each MoE block's kept picks per expert and its dropped picks, summed over
every device inside the compiled step (the "moe" collection of jax_model.py), read from the step's state where the
loss is read (window edges: one small device-to-host copy, no collective) and turned into the record's routing fields
(routing.py, the torch meter's: tokens per expert and per expert-parallel rank, imbalance = max / mean per block
averaged over blocks, the worst block's, dropped picks), per timing window and over the timed window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dlperf.workloads.moe.config import MoEConfig
from dlperf.workloads.moe.routing import LossReader, closing_windows, routing_facts, window_figures

WRAP = 2**32  # the step's int32 counters wrap; a window's difference is taken modulo their range


def read_counts(state: Any) -> tuple[np.ndarray, int]:
    """Every MoE block's running counts (blocks in layer order, experts) and dropped picks from the step's state."""
    blocks = sorted(state, key=lambda name: int(name.rsplit("_", 1)[1]))
    local = lambda leaf: np.asarray(leaf.addressable_data(0)).astype(np.int64)  # noqa: E731  a replicated copy
    counts = [local(state[name]["feed_forward"]["counts"]) for name in blocks]
    dropped = sum(int(local(state[name]["feed_forward"]["dropped"])) for name in blocks)
    return np.stack(counts) if counts else np.zeros((0, 0), np.int64), dropped


class RoutingMeter:
    """The step's window probe (started and stopped around the timed steps); `state_of` gives the step's current
    routing state, `model` the step's facts the result goes into (`moe`, the torch meter's key)."""

    def __init__(self, config: MoEConfig, state_of: Callable[[], Any], model: dict[str, Any]) -> None:
        self.ep, self.state_of, self.model = config.ep, state_of, model
        self.facts = routing_facts(config, "ragged_dot")
        self.timing = False
        self.windows: list[dict[str, Any]] = []
        self.seen: tuple[np.ndarray, int] | None = None
        self.opened: tuple[np.ndarray, int] | None = None

    def wrap(self, read_loss: LossReader) -> LossReader:
        """The step's loss reader, closing the routing window where it reads (after the step it waits for)."""
        return closing_windows(read_loss, self._close_window)

    def _close_window(self) -> None:
        now = read_counts(self.state_of())
        if self.timing and self.seen is not None and now[0].size:
            self.windows.append(window_figures(*_since(now, self.seen), self.ep))
        self.seen = now

    def start(self) -> None:
        """The timed window opens: what the warm-up routed is left out."""
        self.timing, self.windows = True, []
        self.seen = self.opened = read_counts(self.state_of())

    def stop(self) -> None:
        self.timing = False
        if self.windows and self.opened is not None:
            total = window_figures(*_since(read_counts(self.state_of()), self.opened), self.ep)
            self.model["moe"] = {**self.facts, **total, "windows": self.windows}


def _since(now: tuple[np.ndarray, int], then: tuple[np.ndarray, int]) -> tuple[np.ndarray, int]:
    return (now[0] - then[0]) % WRAP, (now[1] - then[1]) % WRAP
