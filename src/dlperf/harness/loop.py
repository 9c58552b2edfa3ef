"""The timed loop: warm-up, then a fixed window of iterations timed on the host between barriers.

It talks to the engine only (sync, barrier, step clock), so every engine is measured the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlperf.engines.base import Engine, TrainStep
from dlperf.records.runlog import WarmupLine, WindowLine

WindowCallback = Callable[[WindowLine], None]
WarmupCallback = Callable[[WarmupLine], None]


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
    compile_s: float | None = None  # ahead-of-time compile time, where the step was compiled before its first run

    @property
    def throughput(self) -> float:
        return self.global_batch * self.iters / self.elapsed_s


def timed_loop(
    step: TrainStep,
    engine: Engine,
    *,
    warmup_iters: int,
    iters: int,
    print_every: int,
    global_batch: int,
    on_window: WindowCallback | None = None,
    on_warmup: WarmupCallback | None = None,
) -> Measurement:
    """Run `warmup_iters` untimed steps, then `iters` timed ones.

    The device is synchronised only at window edges (every `print_every` steps), where the loss is read
    too (by `step.read_loss`, which every rank calls there and nowhere else); per-step latency comes from the
    engine's step clock without a sync per step.
    """
    started = time.perf_counter()
    output = step.run()
    loss_first = step.read_loss(output)  # reading the loss waits for the first step: start-up and compiling
    engine.sync(output)
    first_step_s = time.perf_counter() - started
    for _ in range(warmup_iters - 1):
        output = step.run()

    clock = engine.clock()
    engine.sync(output)
    if on_warmup:  # the live view tells start-up and compiling apart from the timed windows
        on_warmup(WarmupLine(warmup_iters, first_step_s, time.perf_counter() - started, time.time()))
    engine.barrier()
    t0 = window_start = time.perf_counter()
    clock.start()
    windows: list[float] = []
    step_ms: list[float] = []
    loss_now = None
    done_in_window = 0
    for iteration in range(1, iters + 1):
        output = step.run()
        clock.mark()
        done_in_window += 1
        if iteration % print_every and iteration != iters:
            continue
        loss_now = step.read_loss(output)
        engine.sync(output)
        now = time.perf_counter()
        window_s = now - window_start
        windows.append(global_batch * done_in_window / window_s)
        step_ms.extend(clock.collect())
        if on_window:
            on_window(
                WindowLine(iteration, iters, loss_now, windows[-1], window_s * 1000 / done_in_window, time.time())
            )
        window_start, done_in_window = time.perf_counter(), 0
    engine.sync(output)
    engine.barrier()
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
        compile_s=step.compile_s,
    )
