"""What a rank-0 worker hands back: the measurement and every rank's facts, as a typed value (it crosses to the
parent through the records' codec, `records/codec.py`, like every message)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlperf.harness.loop import Measurement


@dataclass(frozen=True)
class RankFacts:
    rank: int
    host: str
    device: str
    peak_memory_mib: dict[str, float]
    local_rank: int = 0
    own_step_ms: list[float] = field(default_factory=list)  # this rank's own work per timed step (loop.Measurement)
    phase_ms: dict[str, list[float]] = field(default_factory=dict)  # its step phases per timed step, where timed
    machine_load: dict[str, Any] | None = None  # the node's, from its local rank 0 (harness/probes.py)
    energy: dict[str, Any] | None = None  # the node's EnergyReading, from its local rank 0
    cpu_threads: int | None = None  # the threads this rank computed with on a CPU device (Engine.cpu_threads)


@dataclass(frozen=True)
class RunMeasurement:
    """Rank 0's measurement of the run, with the facts every rank sent at the end.

    A task run (the `task` kind: a workload's own rank task, commbench's) has no timed-loop `measurement`: its
    JSON-able `output` goes to the workload's `task_record` instead.
    """

    measurement: Measurement | None
    ranks: list[RankFacts]
    device_type: str
    flops_per_iteration: int | None = None  # counted once on rank 0 (TrainStep.count_flops)
    flops_note: str | None = None  # why there is no count
    output: dict[str, Any] | None = None

    @property
    def throughput(self) -> float:
        return self.measurement.throughput

    @property
    def peak_memory_mib(self) -> dict[str, float]:
        """The peak a device had to hold is the largest of any rank's."""
        keys = sorted({k for r in self.ranks for k in r.peak_memory_mib})
        return {k: round(max(r.peak_memory_mib.get(k, 0.0) for r in self.ranks), 1) for k in keys}
