"""The largest batch per device that trains without running out of memory, and the fastest one.

Grow geometrically from `start` until a probe runs out of memory, then bisect between the last batch that fit
and the first that did not. A probe is any callable batch -> ProbeOutcome; `RunProbe` runs each one as a fresh
process, because an out-of-memory error can leave an allocator (CUDA's especially) unusable for the next try.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dlperf.errors import ConfigError
from dlperf.records.parts import Probe

Status = Literal["ok", "oom", "error"]


@dataclass(frozen=True)
class ProbeOutcome:
    """What one run at one batch gave: `oom` for out of memory, `error` for any other failure."""

    status: Status
    throughput: float | None = None
    peak_memory_mib: float | None = None
    limit_mib: float | None = None  # the memory the batch must fit in, where the probe knows it
    reason: str | None = None


@dataclass(frozen=True)
class MaxBatchResult:
    probes: tuple[Probe, ...]
    max_batch: int | None  # the largest batch that fit; None when even the smallest tried did not
    best_batch: int | None  # the fitting batch with the highest throughput
    best_throughput: float | None
    headroom_pct: float
    error: str | None = None  # a probe failed for a reason other than memory: the search stopped there


def _judge(batch: int, outcome: ProbeOutcome, headroom_pct: float) -> Probe:
    """A run that finished still does not fit when its peak leaves less than the headroom below a known limit."""
    fits = outcome.status == "ok"
    reason = outcome.reason
    if fits and outcome.limit_mib is not None and outcome.peak_memory_mib is not None:
        allowed = outcome.limit_mib * (1 - headroom_pct / 100)
        if outcome.peak_memory_mib > allowed:
            fits = False
            reason = (
                f"peak {outcome.peak_memory_mib:.0f} MiB is over {allowed:.0f} MiB "
                f"({100 - headroom_pct:g} % of the {outcome.limit_mib:.0f} MiB limit)"
            )
    return Probe(batch, fits, outcome.status, outcome.throughput, outcome.peak_memory_mib, reason)


class _Stop(Exception):
    """A probe failed for a reason other than memory."""


class _Search:
    """The search's state: every probe so far, the largest batch known to fit and the smallest known not to."""

    def __init__(
        self, probe: Callable[[int], ProbeOutcome], headroom_pct: float, on_probe: Callable[[Probe], None] | None
    ) -> None:
        self.probe, self.headroom_pct, self.on_probe = probe, headroom_pct, on_probe
        self.probes: list[Probe] = []
        self.fit, self.fail = 0, None

    def fits(self, batch: int) -> bool:
        """Run one probe and move the bounds; a failure other than memory stops the search."""
        result = _judge(batch, self.probe(batch), self.headroom_pct)
        self.probes.append(result)
        if self.on_probe is not None:
            self.on_probe(result)
        if result.status == "error":
            raise _Stop(f"batch {batch}: {result.reason}")
        if result.fits:
            self.fit = batch
        else:
            self.fail = batch
        return result.fits

    def grow(self, start: int, max_batch: int) -> None:
        """x2 from the start up to the ceiling, until a batch does not fit."""
        batch = start
        while self.fail is None and self.fit < max_batch and self.fits(batch):
            batch = min(2 * batch, max_batch)

    def halve(self, start: int) -> None:
        """The start did not fit: halve until a batch does (or 1 does not)."""
        batch = start // 2
        while not self.fit and batch >= 1 and not self.fits(batch):
            batch //= 2

    def result(self, error: str | None) -> MaxBatchResult:
        """The largest fitting batch and the fastest one among the probes that fit."""
        fitting = [p for p in self.probes if p.fits and p.throughput is not None]
        best = max(fitting, key=lambda p: p.throughput, default=None)
        return MaxBatchResult(
            probes=tuple(self.probes),
            max_batch=self.fit or None,
            best_batch=best.batch if best else None,
            best_throughput=best.throughput if best else None,
            headroom_pct=self.headroom_pct,
            error=error,
        )

    def bisect(self, step: int) -> None:
        while self.fit and self.fail is not None and self.fail - self.fit > step:
            self.fits((self.fit + self.fail) // 2)


def find_max_batch(
    probe: Callable[[int], ProbeOutcome],
    start: int = 1,
    max_batch: int = 65536,
    headroom_pct: float = 0.0,
    step: int = 1,
    on_probe: Callable[[Probe], None] | None = None,
) -> MaxBatchResult:
    """Probe batches until the largest fitting one is known to within `step` (1: exactly).

    If `start` itself does not fit, halve down to 1 first. A failure that is not out of memory (a bad flag, a
    crash) stops the search: more probes would fail the same way and say nothing about memory. `on_probe` hears
    each probe as it finishes (the console prints it then, not after the whole search).
    """
    if start < 1 or max_batch < start or step < 1:
        raise ConfigError(f"need 1 <= start <= max batch and step >= 1, got {start}, {max_batch} and {step}")
    if not 0 <= headroom_pct < 100:
        raise ConfigError(f"--headroom is a percentage in [0, 100), got {headroom_pct}")
    search = _Search(probe, headroom_pct, on_probe)
    error = None
    try:
        search.grow(start, max_batch)
        search.halve(start)
        search.bisect(step)
    except _Stop as stop:
        error = str(stop)
    return search.result(error)
