"""Each rank's own work per step, without the wait for the other ranks: the straggler evidence.

In synchronous data parallelism every rank leaves a step only when the gradient all-reduce is done, so the whole
step lasts equally long on every rank and a slow rank is invisible in step times. What differs is the work before
the wait: from the end of the previous step (the loop's mark) to the moment backward has produced the gradient of
the parameter it reaches last (the first layer's weight); the all-reduce of the last bucket, and the wait for
slower ranks, come after. A post-accumulate-grad hook on that parameter marks the moment: the host clock on the
CPU, a CUDA event on the current stream on a GPU (resolved at window edges only, like the step clock).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from dlperf.engines.base import StepClock

OWN_WORK = "own work: previous step's end to the first layer's gradient, before the all-reduce wait"


class OwnWorkClock(StepClock):
    """Step clock whose durations end at `param`'s gradient instead of at the step's end."""

    def __init__(self, param: torch.nn.Parameter, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._grad_at: Any = None
        self._prev: Any = None
        self._spans: list[tuple[Any, Any]] = []
        param.register_post_accumulate_grad_hook(self._grad_ready)

    def _now(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _grad_ready(self, _param: torch.Tensor) -> None:
        self._grad_at = self._now()  # the last accumulation of the step wins (gradient accumulation)

    def start(self) -> None:
        self._prev, self._grad_at, self._spans = self._now(), None, []

    def mark(self) -> None:
        end = self._now()
        self._spans.append((self._prev, self._grad_at if self._grad_at is not None else end))
        self._prev, self._grad_at = end, None

    def collect(self) -> list[float]:
        spans, self._spans = self._spans, []
        if self.cuda:
            if spans:
                spans[-1][1].synchronize()
            return [a.elapsed_time(b) for a, b in spans]
        return [(b - a) * 1000.0 for a, b in spans]
