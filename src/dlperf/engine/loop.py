"""The timed loop: warm-up, then a fixed window of iterations timed on the host between barriers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from dlperf.metrics.timing import StepClock, synchronize
from dlperf.reporting.runlog import WindowLine

if TYPE_CHECKING:  # workloads import this module for loss_value
    from dlperf.config import RunConfig
    from dlperf.workloads.base import DistContext, Workload

WindowCallback = Callable[[WindowLine], None]
LossReader = Callable[[torch.Tensor | None], float | None]


@dataclass
class Measurement:
    """What rank 0 measured; throughputs are global samples per second."""

    iters: int
    global_batch: int
    elapsed_s: float
    first_step_s: float
    window_throughputs: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    loss_first: float | None = None
    loss_last: float | None = None

    @property
    def throughput(self) -> float:
        return self.global_batch * self.iters / self.elapsed_s


def loss_value(loss: torch.Tensor | None) -> float | None:
    """This rank's own loss as a float (a device sync), or None where the rank computes none."""
    return None if loss is None else float(loss.float().item())


def timed_loop(
    step: Callable[[], torch.Tensor | None],
    *,
    device: torch.device,
    warmup_iters: int,
    iters: int,
    print_every: int,
    global_batch: int,
    barrier: Callable[[], None] = lambda: None,
    on_window: WindowCallback | None = None,
    read_loss: LossReader = loss_value,
) -> Measurement:
    """Run `warmup_iters` untimed steps, then `iters` timed ones.

    The device is synchronised only at window edges (every `print_every` steps), where the loss is read
    too (by `read_loss`, which every rank calls there and nowhere else); per-step latency comes from the
    StepClock without a sync per step.
    """
    started = time.perf_counter()
    loss_first = read_loss(step())  # .item() waits for the first step: start-up and compiling
    synchronize(device)
    first_step_s = time.perf_counter() - started
    for _ in range(warmup_iters - 1):
        step()

    clock = StepClock(device)
    synchronize(device)
    barrier()
    t0 = window_start = time.perf_counter()
    clock.start()
    windows: list[float] = []
    step_ms: list[float] = []
    loss_now = None
    done_in_window = 0
    for iteration in range(1, iters + 1):
        loss = step()
        clock.mark()
        done_in_window += 1
        if iteration % print_every and iteration != iters:
            continue
        loss_now = read_loss(loss)
        synchronize(device)
        now = time.perf_counter()
        window_s = now - window_start
        windows.append(global_batch * done_in_window / window_s)
        step_ms.extend(clock.collect())
        if on_window:
            on_window(
                WindowLine(iteration, iters, loss_now, windows[-1], window_s * 1000 / done_in_window, time.time())
            )
        window_start, done_in_window = time.perf_counter(), 0
    synchronize(device)
    barrier()
    elapsed = time.perf_counter() - t0
    return Measurement(
        iters=iters,
        global_batch=global_batch,
        elapsed_s=elapsed,
        first_step_s=first_step_s,
        window_throughputs=windows,
        step_ms=step_ms,
        loss_first=loss_first,
        loss_last=loss_now,  # the last iteration always closes a window
    )


def time_workload(
    workload: Workload,
    config: RunConfig,
    ctx: DistContext,
    *,
    barrier: Callable[[], None] = lambda: None,
    on_window: WindowCallback | None = None,
) -> Measurement:
    """Build the workload's step on this rank and time it with the config's warm-up, iterations and windows."""
    return timed_loop(
        workload.build(config, ctx),
        device=ctx.device,
        warmup_iters=config.warmup_iters,
        iters=config.iters,
        print_every=config.print_every,
        global_batch=workload.global_batch(config),
        barrier=barrier,
        on_window=on_window,
        read_loss=lambda loss: workload.read_loss(config, ctx, loss),
    )
