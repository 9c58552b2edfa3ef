"""Which rank holds the others back: per-rank median step time from the step times gathered at window edges.

In data-parallel training every step waits for the slowest rank, so one slow device, host or NIC sets the pace of
all. Each rank's own step times (measured without a per-step sync, gathered at window edges) are summarised by their
median (robust to the odd slow step); the *median rank* is the median of those medians. A rank whose median is more
than `straggler_pct` (default 5 %) above the median rank's is a straggler. The spread is
(slowest - fastest) / median rank.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from dlperf.records.parts import Stragglers

DEFAULT_STRAGGLER_PCT = 0.05


def find_stragglers(
    step_ms_per_rank: Sequence[Sequence[float]],
    hosts: Sequence[str],
    straggler_pct: float = DEFAULT_STRAGGLER_PCT,
    measure: str | None = None,
) -> Stragglers:
    """Per-rank summary from each rank's step times (index = rank) and each rank's host (`measure`: what was timed);
    `stragglers` the ranks more than straggler_pct slower than the median rank."""
    if not step_ms_per_rank or len(step_ms_per_rank) != len(hosts):
        raise ValueError(f"{len(step_ms_per_rank)} ranks of step times but {len(hosts)} hosts")
    if any(not steps for steps in step_ms_per_rank):
        raise ValueError("every rank needs at least one step time")
    if straggler_pct < 0:
        raise ValueError(f"--straggler-pct must not be negative, got {straggler_pct}")
    medians = [statistics.median(steps) for steps in step_ms_per_rank]
    middle = statistics.median(medians)
    slowest = max(range(len(medians)), key=medians.__getitem__)
    stragglers = [rank for rank, m in enumerate(medians) if m > middle * (1 + straggler_pct)]
    return Stragglers(
        rank_median_ms=medians,
        median_rank_ms=middle,
        slowest_rank=slowest,
        slowest_host=hosts[slowest],
        spread=(max(medians) - min(medians)) / middle,
        straggler_pct=straggler_pct,
        stragglers=stragglers,
        flagged=bool(stragglers),
        measure=measure,
    )
