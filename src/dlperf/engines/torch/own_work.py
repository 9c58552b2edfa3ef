"""Each rank's own work per step, without the waits for the other ranks (the straggler evidence), and the phases
of its step (where the scaling went).

In synchronous data parallelism every rank leaves a step only when the gradient all-reduce is done (and DDP
broadcasts buffers from rank 0 before each forward), so the whole step lasts equally long on every rank and a slow
rank is invisible in step times. What differs is the work between those waits: from the start of the model's own
forward (after DDP's buffer broadcast; the first micro-batch's, under gradient accumulation) to the moment backward
has produced the gradient of the parameter it reaches last (the first layer's weight); the all-reduce of the last
bucket, and the wait for slower ranks, come after. A forward pre-hook and a post-accumulate-grad hook mark the two
moments: the host clock on the CPU, CUDA events on the current stream on a GPU (resolved at window edges only, like
the step clock).

The step marks two more moments itself (`data_phase` when its batch is ready, `backward_done` when backward
returns), so each step splits into the phases of `metrics.step_phases.PHASES`: data, sync_in (to the forward's
start: DDP's buffer broadcast), compute (to the last gradient), sync_out (to backward's return: the last buckets'
all-reduce and the wait for slower ranks), update (to the step's end: the optimizer). On a GPU a phase is device
time between events, so the host's wait for a batch counts only where the device ran dry.

Test hooks: `DLPERF_TEST_SLOW_RANK=RANK:MS` makes that rank sleep MS at the start of every forward, inside its own
work, as a slower device would; `DLPERF_TEST_SLOW_LOADER=MS` makes every rank's batch MS late, as a data loader that
cannot keep up would. They let the tests (and a user rehearsing) produce a straggler or a data stall on purpose.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from dlperf.engines.base import StepClock
from dlperf.metrics.step_phases import PHASES

OWN_WORK = "own work: the model's forward start (after DDP's buffer broadcast) to the first layer's gradient"
SLOW_RANK_ENV = "DLPERF_TEST_SLOW_RANK"
SLOW_LOADER_ENV = "DLPERF_TEST_SLOW_LOADER"

Batch = TypeVar("Batch")


def _slow_ms(rank: int) -> float:
    target, _, ms = os.environ.get(SLOW_RANK_ENV, "").partition(":")
    return float(ms) if target and int(target) == rank else 0.0


class OwnWorkClock(StepClock):
    """Step clock measuring from `module`'s forward start to `param`'s gradient, per step; it keeps the step's
    phases beside (`phases`)."""

    def __init__(self, module: torch.nn.Module, param: torch.nn.Parameter, device: torch.device, rank: int) -> None:
        self.cuda = device.type == "cuda"
        self.slow_s = _slow_ms(rank) / 1000
        self._prev: Any = None
        self._step: dict[str, Any] = {}
        self._spans: list[list[Any]] = []  # per step: its start, the five phases' ends
        self._phase_ms: dict[str, list[float]] | None = {name: [] for name in PHASES}
        module.register_forward_pre_hook(self._forward_starts)
        param.register_post_accumulate_grad_hook(self._grad_ready)

    def _now(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _forward_starts(self, *_: Any) -> None:
        if "forward" not in self._step:  # the step's first forward (micro-batch)
            self._step["forward"] = self._now()
        if self.slow_s:
            time.sleep(self.slow_s)

    def _grad_ready(self, _param: torch.Tensor) -> None:
        self._step["grad"] = self._now()  # the last accumulation of the step wins (gradient accumulation)

    def data_ready(self) -> None:
        """The step's batch is on the device."""
        if "data" not in self._step:
            self._step["data"] = self._now()

    def backward_done(self) -> None:
        """Backward returned (the last micro-batch's wins): DDP's all-reduces are done, or queued before this."""
        self._step["backward"] = self._now()

    def start(self) -> None:
        self._step, self._spans = {}, []
        self._phase_ms = {name: [] for name in PHASES}
        self._prev = self._now()

    def mark(self) -> None:
        """Close a step. Own work falls back to the step's edges for a forward or gradient not seen; a step without
        all its marks (a workload that does not mark its batch or backward) has no phases, nor has its window."""
        end = self._now()
        s = self._step
        self._spans.append([self._prev, s.get("data"), s.get("forward"), s.get("grad"), s.get("backward"), end])
        self._step, self._prev = {}, end

    def _elapsed(self, a: Any, b: Any) -> float:
        return a.elapsed_time(b) if self.cuda else (b - a) * 1000.0

    def collect(self) -> list[float]:
        spans, self._spans = self._spans, []
        if self.cuda and spans:
            spans[-1][-1].synchronize()
        own = [self._elapsed(forward or start, grad or end) for start, _, forward, grad, _, end in spans]
        for points in spans:
            if self._phase_ms is None or None in points:
                self._phase_ms = None
                continue
            for name, a, b in zip(PHASES, points, points[1:]):
                self._phase_ms[name].append(self._elapsed(a, b))
        return own

    def phases(self) -> dict[str, list[float]]:
        return self._phase_ms or {}


def data_phase(clock: OwnWorkClock | None, fetch: Callable[..., Batch]) -> Callable[..., Batch]:
    """`fetch` marking the end of the step's data phase on `clock` (with `DLPERF_TEST_SLOW_LOADER`'s delay)."""
    late_s = float(os.environ.get(SLOW_LOADER_ENV) or 0) / 1000

    def fetched(*args: Any) -> Batch:
        batch = fetch(*args)
        if late_s:
            time.sleep(late_s)
        if clock:
            clock.data_ready()
        return batch

    return fetched
