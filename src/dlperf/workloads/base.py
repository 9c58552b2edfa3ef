"""What a workload gives the harness: validation, naming, a training step, and its own derived metrics."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from dlperf.config import RunConfig
from dlperf.engine.loop import loss_value

# One training iteration (one global batch); returns the loss on ranks that compute it, else None.
TrainStep = Callable[[], "torch.Tensor | None"]


@dataclass(frozen=True)
class DistContext:
    """Where this process sits: filled from torchrun's environment by the worker."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


class Workload(ABC):
    """A model plus its data and optimizer, benchmarked by the generic timed loop."""

    name: str

    @abstractmethod
    def validate(self, config: RunConfig) -> None:
        """Raise ConfigError for values this workload cannot run; called before any process starts."""

    @abstractmethod
    def global_batch(self, config: RunConfig) -> int:
        """Samples consumed by one iteration across all ranks (the throughput's numerator)."""

    @abstractmethod
    def group(self, config: RunConfig) -> str:
        """The report table a run belongs to: every setting except the topology, e.g. `b128_fp32`."""

    @abstractmethod
    def run_stem(self, config: RunConfig) -> str:
        """File stem of a run's log and record, without the repeat number."""

    @abstractmethod
    def build(self, config: RunConfig, ctx: DistContext) -> TrainStep:
        """Build model, data and optimizer on this rank and return the step to time."""

    def read_loss(self, config: RunConfig, ctx: DistContext, loss: torch.Tensor | None) -> float | None:
        """The loss rank 0 logs; every rank calls it at window edges only, so it may hold one collective
        (e.g. fetch the loss from the last pipeline stage). Default: this rank's own loss."""
        return loss_value(loss)

    def derived_metrics(self, config: RunConfig, measured: dict[str, Any]) -> dict[str, Any]:
        """Extra record fields computed from the measurement (e.g. tokens/s, MFU); none by default."""
        return {}
