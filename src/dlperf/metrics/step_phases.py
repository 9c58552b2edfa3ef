"""Where a data-parallel step's time goes, from every rank's per-step phases (engines/torch/own_work.py).

Every step of a rank splits into PHASES: `data` (its batch), `sync_in` (to its forward's start: DDP's buffer
broadcast), `compute` (forward and backward to the last gradient, the overlapped all-reduces beside it), `sync_out`
(to backward's return: the last buckets' all-reduce, and the wait for slower ranks) and `update` (to the step's end:
the optimizer). sync_in + sync_out is the rank's time in collectives outside its compute.

Every rank leaves a collective together, so in each step the rank with the least collective time is the slowest:
what it spends there is communication that no compute hid (`exposed_ms`). Every other rank spends more, waiting for
the slower ones; the fastest rank's excess over the slowest is the straggler wait (`straggler_wait_ms`): what the
step would save if every rank were as fast as the fastest. That fastest rank's own phases make up the rest of the
step (`phases_ms`, per step on the rank that waits most). Each figure is a mean over the timed steps, so the parts
add up to the mean step on that rank.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

PHASES = ("data", "sync_in", "compute", "sync_out", "update")
COLLECTIVE = ("sync_in", "sync_out")


@dataclass(frozen=True)
class StepPhases:
    steps: int
    ranks: int
    phases_ms: dict[str, float]  # mean per step, each step on the rank with the most collective time
    exposed_ms: float  # mean per step of the least collective time of any rank
    straggler_wait_ms: float  # mean per step of the most minus the least collective time
    rank_collective_ms: list[float]  # each rank's mean collective time per step

    @property
    def step_ms(self) -> float:
        return sum(self.phases_ms.values())

    def as_record(self, measure: str) -> dict[str, object]:
        """Record field `step_phases`: the above, the mean step they add up to, and how they were timed."""
        return {"measure": measure, **asdict(self), "step_ms": self.step_ms}


def summarise_phases(per_rank: Sequence[Mapping[str, Sequence[float]]]) -> StepPhases:
    """The run's step phases from each rank's phase times per step (index = rank; milliseconds, PHASES as keys)."""
    if not per_rank:
        raise ValueError("no rank timed its step phases")
    steps = len(per_rank[0].get("data") or ())
    for rank, phases in enumerate(per_rank):
        if sorted(phases) != sorted(PHASES) or any(len(phases[name]) != steps for name in PHASES):
            raise ValueError(f"rank {rank} timed other phases or another number of steps than rank 0 ({steps})")
    if not steps:
        raise ValueError("no timed step has its phases")
    collective = [[sum(p[name][i] for name in COLLECTIVE) for i in range(steps)] for p in per_rank]
    waits = [[c[i] for c in collective] for i in range(steps)]
    fastest = [max(range(len(per_rank)), key=lambda r, i=i: collective[r][i]) for i in range(steps)]
    return StepPhases(
        steps=steps,
        ranks=len(per_rank),
        phases_ms={name: statistics.fmean(per_rank[fastest[i]][name][i] for i in range(steps)) for name in PHASES},
        exposed_ms=statistics.fmean(min(w) for w in waits),
        straggler_wait_ms=statistics.fmean(max(w) - min(w) for w in waits),
        rank_collective_ms=[statistics.fmean(c) for c in collective],
    )
