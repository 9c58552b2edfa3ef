"""The start-up hook's GPU side (sitecustomize.py imports it once a script's optimizer steps): step times as the GPU
finishes the steps, and the steps GradScaler skips. Standard library only at import; torch is the script's own,
imported before any of this runs.

On a GPU, `optimizer.step()` returns when its kernels are queued: the host time there is an enqueue time, ahead of
the GPU by as much as the script lets the host run ahead (up to a logging interval of steps where the script syncs
only at its log lines), so a window's two ends could differ by that lead. `CudaStepClock` records a CUDA event on
the current stream after each step instead and turns it into host time (`time.monotonic`, the side file's clock)
once the GPU has run it, at the side file's next flush: against an anchor, an event whose completion the host saw
(it waited for it) with the host time then. The first step anchors (one wait for the GPU, in the script's first
step); a flush that finds the stream idle anchors again (no wait), so the two clocks cannot drift apart over a
long run. Steps the hook cannot stamp on the GPU (a CUDA graph being captured) keep host time.

GradScaler skips `optimizer.step()` itself on inf/nan gradients (fp16's first steps, while the scale settles),
so the step hook never sees those iterations; `count_skipped_steps` counts them as steps.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any


class CudaStepClock:
    """Stamps on one CUDA device's current stream; `ready` hands back the finished steps' entries with host times,
    in order. Never raises into the script: where CUDA fails it gives the pending steps their enqueue times and
    says why in `problem`."""

    def __init__(self, torch: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.torch, self.clock = torch, clock
        self.pending: deque[tuple[Any, Any, float]] = deque()  # (entry, event, host time at enqueue)
        self.spare: list[Any] = []  # converted events, recorded again (creating one costs more)
        self.anchor: tuple[Any, float] | None = None
        self.problem: str | None = None

    def event(self, again: Any = None) -> Any:
        """A CUDA event recorded now on the current stream (`again` recorded anew where given: an update's later
        step() calls move its one event), or None where the hook cannot record one (a CUDA graph being captured,
        or CUDA failed before): that step keeps its host time."""
        if self.problem is not None:
            return None
        cuda = self.torch.cuda
        try:
            if cuda.is_current_stream_capturing():
                return None
            if self.anchor is None:
                self.anchor = self._anchored()
            event = again if again is not None else self.spare.pop() if self.spare else cuda.Event(enable_timing=True)
            event.record()
        except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
            self._failed(error)
            return None
        return event

    def add(self, entry: Any, event: Any, queued: float) -> None:
        """`entry` is done when the GPU reaches `event` (None: at `queued`, its host time, kept in order with the
        others)."""
        self.pending.append((entry, event, queued))

    def ready(self, final: bool = False) -> list[tuple[Any, float]]:
        """The stamped steps the GPU has finished, oldest first, each with the host time it finished at; with
        `final` (the script's exit) every pending one, waiting for the GPU."""
        done: list[tuple[Any, float]] = []
        try:
            if final:
                self._wait_for_last()
            while self.pending and _reached(self.pending[0][1]):
                done.append(self._finished(*self.pending.popleft()))
            if not self.pending and not final and self.torch.cuda.current_stream().query():
                self.anchor = self._anchored()  # the stream is idle: anchoring again waits for nothing
        except Exception as error:  # noqa: BLE001 - the script must not see the hook's own failure
            self._failed(error)
            done += [(entry, queued) for entry, _, queued in self.pending]
            self.pending.clear()
        return done

    def _wait_for_last(self) -> None:
        """Wait until the GPU has run the last recorded event (the script's exit)."""
        last = next((event for _, event, _ in reversed(self.pending) if event is not None), None)
        if last is not None:
            last.synchronize()

    def _finished(self, entry: Any, event: Any, queued: float) -> tuple[Any, float]:
        """A finished step's entry with its host time: the anchor's plus the GPU's time from the anchor to its
        event (None: its enqueue time); the event is kept to be recorded again."""
        if event is None:
            return entry, queued
        anchor, at = self.anchor  # type: ignore[misc]
        stamped = (entry, at + anchor.elapsed_time(event) / 1000)
        self.spare.append(event)
        return stamped

    def _failed(self, error: Exception) -> None:
        self.problem = f"CUDA step events failed, steps keep host times: {type(error).__name__}: {error}"

    def _anchored(self) -> tuple[Any, float]:
        event = self.torch.cuda.Event(enable_timing=True)
        event.record()
        event.synchronize()
        return event, self.clock()


def _reached(event: Any) -> bool:
    """The GPU has run the step's event (None: a step with its host time, done when the steps before it are)."""
    return event is None or event.query()


def clock_for(optimizer: Any) -> CudaStepClock | None:
    """A CUDA clock where the optimizer's parameters live on a CUDA device, else None (host time is the step's)."""
    torch = sys.modules.get("torch")
    for group in getattr(optimizer, "param_groups", ()):
        for param in group.get("params", ()):
            if torch is not None and getattr(getattr(param, "device", None), "type", None) == "cuda":
                return CudaStepClock(torch)
            return None
    return None


def count_skipped_steps(grad_scaler_module: Any, on_step: Callable[[Any, tuple, dict], None]) -> None:
    """Wrap `GradScaler.step` (torch.amp.grad_scaler; its subclasses, ShardedGradScaler and torch.cuda.amp's,
    inherit it): where it returned without stepping the optimizer, call `on_step` as torch's step post-hook would
    have. A fused optimizer is always stepped (it skips on the device) and a disabled scaler steps plainly: both
    reach the post-hook themselves and are not counted twice."""
    scaler = grad_scaler_module.GradScaler
    original = scaler.step
    stepped = [0]
    hooked: list[bool] = []

    def count(*_args: Any) -> None:
        stepped[0] += 1

    def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        if not hooked:  # torch.optim is imported by now, whichever of the two modules came first
            try:
                importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(count)
                hooked.append(True)
            except Exception:  # noqa: BLE001 - the script must not see the hook's own failure: no counting
                hooked.append(False)
        before = stepped[0]
        result = original(self, optimizer, *args, **kwargs)
        if hooked[0] and stepped[0] == before:
            on_step(optimizer, args, kwargs)
        return result

    scaler.step = step
