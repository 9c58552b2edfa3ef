"""Where a data-parallel step's time goes, from every rank's per-step phases (engines/torch/own_work.py).

Every step of a rank splits into PHASES: `data` (its batch), `sync_in` (to its forward's start: DDP's buffer
broadcast), `compute` (forward and backward to the last gradient, the overlapped all-reduces beside it), `sync_out`
(to backward's return: the last buckets' all-reduce, and the wait for slower ranks) and `update` (to the step's end:
the optimizer). sync_in + sync_out is the rank's time in collectives outside its compute.

Every rank leaves a collective together, so the rank with the least collective time is the slowest: what it spends
there is communication that no compute hid (`exposed_ms`). Every other rank spends more, waiting for the slower ones;
the fastest rank's excess over the slowest is the straggler wait (`straggler_wait_ms`): what the step would save if
every rank were as fast as the fastest. That fastest rank's own phases make up the rest of its step (`phases_ms`).
Each figure is a rank's mean over the timed steps, so the parts add up to the mean step; ranks whose turns at
being slow alternate from step to step wait for each other too, and that wait counts as communication.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from dlperf.records.parts import Phases, StepPhases

PHASES = ("data", "sync_in", "compute", "sync_out", "update")
COLLECTIVE = ("sync_in", "sync_out")


def _checked_steps(per_rank: Sequence[Mapping[str, Sequence[float]]]) -> int:
    """The number of timed steps, the same on every rank for every phase; ValueError otherwise."""
    if not per_rank:
        raise ValueError("no rank timed its step phases")
    steps = len(per_rank[0].get("data") or ())
    for rank, phases in enumerate(per_rank):
        if sorted(phases) != sorted(PHASES) or any(len(phases[name]) != steps for name in PHASES):
            raise ValueError(f"rank {rank} timed other phases or another number of steps than rank 0 ({steps})")
    if not steps:
        raise ValueError("no timed step has its phases")
    return steps


def summarise_phases(per_rank: Sequence[Mapping[str, Sequence[float]]], measure: str | None = None) -> StepPhases:
    """The run's step phases from each rank's phase times per step (index = rank; milliseconds, PHASES as keys),
    timed by `measure`: the phases of the rank with the most collective time (the fastest), the least collective
    time of any rank (exposed), the most minus the least (the straggler wait), each rank's collective time and the
    mean step they add up to."""
    steps = _checked_steps(per_rank)
    means = [{name: statistics.fmean(phases[name]) for name in PHASES} for phases in per_rank]
    collective = [sum(m[name] for name in COLLECTIVE) for m in means]
    fastest = max(range(len(means)), key=collective.__getitem__)
    return StepPhases(
        measure=measure,
        steps=steps,
        ranks=len(per_rank),
        phases_ms=Phases(**means[fastest]),
        exposed_ms=min(collective),
        straggler_wait_ms=max(collective) - min(collective),
        rank_collective_ms=collective,
        step_ms=sum(means[fastest].values()),
    )
