"""Per-step latency without a synchronisation per step: CUDA events on GPUs, the host clock on CPUs."""

from __future__ import annotations

import time

import torch

from dlperf.engines.base import StepClock


class TorchStepClock(StepClock):
    """Marks the end of every step and resolves the marks at window edges only.

    On CUDA each mark records an event on the current stream (no host sync); `collect` synchronises
    once and reads the elapsed times. On the CPU work is synchronous, so the host clock is exact.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._marks: list = []

    def _now(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def start(self) -> None:
        """Open a window: the next mark measures from here."""
        self._marks = [self._now()]

    def mark(self) -> None:
        self._marks.append(self._now())

    def collect(self) -> list[float]:
        """Milliseconds of each step since `start`/the last collect, and reopen at the last mark."""
        marks = self._marks
        if self.cuda:
            marks[-1].synchronize()
            durations = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        else:
            durations = [(b - a) * 1000.0 for a, b in zip(marks, marks[1:])]
        self._marks = [marks[-1]]
        return durations


def synchronize(device: torch.device) -> None:
    """Wait for queued device work; a no-op on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
