"""Each rank's own work per step, without the waits for the other ranks: the straggler evidence.

In synchronous data parallelism every rank leaves a step only when the gradient all-reduce is done (and DDP
broadcasts buffers from rank 0 before each forward), so the whole step lasts equally long on every rank and a slow
rank is invisible in step times. What differs is the work between those waits: from the start of the model's own
forward (after DDP's buffer broadcast; the first micro-batch's, under gradient accumulation) to the moment backward
has produced the gradient of the parameter it reaches last (the first layer's weight); the all-reduce of the last
bucket, and the wait for slower ranks, come after. A forward pre-hook and a post-accumulate-grad hook mark the two
moments: the host clock on the CPU, CUDA events on the current stream on a GPU (resolved at window edges only, like
the step clock).

Test hook: `DLPERF_TEST_SLOW_RANK=RANK:MS` makes that rank sleep MS at the start of every forward, inside its own
work, as a slower device would; it lets the tests (and a user rehearsing) produce a straggler on purpose.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from dlperf.engines.base import StepClock

OWN_WORK = "own work: the model's forward start (after DDP's buffer broadcast) to the first layer's gradient"
SLOW_RANK_ENV = "DLPERF_TEST_SLOW_RANK"


def _slow_ms(rank: int) -> float:
    target, _, ms = os.environ.get(SLOW_RANK_ENV, "").partition(":")
    return float(ms) if target and int(target) == rank else 0.0


class OwnWorkClock(StepClock):
    """Step clock measuring from `module`'s forward start to `param`'s gradient, per step."""

    def __init__(self, module: torch.nn.Module, param: torch.nn.Parameter, device: torch.device, rank: int) -> None:
        self.cuda = device.type == "cuda"
        self.slow_s = _slow_ms(rank) / 1000
        self._begin: Any = None
        self._prev: Any = None
        self._grad_at: Any = None
        self._spans: list[tuple[Any, Any]] = []
        module.register_forward_pre_hook(self._forward_starts)
        param.register_post_accumulate_grad_hook(self._grad_ready)

    def _now(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _forward_starts(self, *_: Any) -> None:
        if self._begin is None:  # the step's first forward (micro-batch)
            self._begin = self._now()
        if self.slow_s:
            time.sleep(self.slow_s)

    def _grad_ready(self, _param: torch.Tensor) -> None:
        self._grad_at = self._now()  # the last accumulation of the step wins (gradient accumulation)

    def start(self) -> None:
        self._begin, self._grad_at, self._spans = None, None, []
        self._prev = self._now()

    def mark(self) -> None:
        """Close a step; a step whose forward or gradient was not seen falls back to the step's edges."""
        end = self._now()
        self._spans.append((self._begin or self._prev, self._grad_at or end))
        self._begin, self._grad_at, self._prev = None, None, end

    def collect(self) -> list[float]:
        spans, self._spans = self._spans, []
        if self.cuda:
            if spans:
                spans[-1][1].synchronize()
            return [a.elapsed_time(b) for a, b in spans]
        return [(b - a) * 1000.0 for a, b in spans]
