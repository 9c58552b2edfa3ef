"""`--ablate sync`'s windows (harness/loop.py) on a fake step: every step of an unsynchronised window runs inside
the step's no_sync(), every synchronised one outside it, and the pairs alternate which mode goes first."""

from __future__ import annotations

from contextlib import contextmanager

from dlperf.engines.base import TrainStep
from dlperf.harness.loop import _ablation_windows


class _Engine:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def sync(self, outputs: object = None) -> None:
        pass

    def barrier(self) -> None:
        self.log.append("barrier")


def test_unsynchronised_windows_run_every_step_inside_no_sync():
    inside = [False]
    log: list[str] = []

    @contextmanager
    def no_sync():
        inside[0] = True
        yield
        inside[0] = False

    def run() -> None:
        log.append("unsynced" if inside[0] else "synced")

    step = TrainStep(run=run, read_loss=lambda _: 0.0, no_sync=no_sync)
    unsynced, synced = _ablation_windows(step, _Engine(log), iters=5, print_every=2, global_batch=4)
    assert len(unsynced) == len(synced) == 3  # windows of 2, 2 and 1 steps of each
    # each window: an untimed step, a barrier, its steps, a barrier; the unsynchronised window first in pairs 0, 2
    windows = [window.split() for window in " ".join(log).split(" barrier ")]
    assert windows == [
        ["unsynced"], ["unsynced", "unsynced"], ["synced"], ["synced", "synced"],
        ["synced"], ["synced", "synced"], ["unsynced"], ["unsynced", "unsynced"],
        ["unsynced"], ["unsynced"], ["synced"], ["synced", "barrier"],
    ]  # fmt: skip
