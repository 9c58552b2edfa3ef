"""The timed loop: warm-up (fixed, or until the windows are steady), then a fixed window of iterations timed on the
host between barriers.

It talks to the engine only (sync, barrier, gather, step clock), so every engine is measured the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from dlperf.engines.base import Engine, StepClock, TrainStep
from dlperf.metrics.steady import DEFAULT_TOLERANCE, DEFAULT_WINDOWS, is_stable
from dlperf.records.runlog import WarmupLine, WindowLine

WindowCallback = Callable[[WindowLine], None]
WarmupCallback = Callable[[WarmupLine], None]


class WindowProbe(Protocol):
    """Something measured over exactly the timed window (machine load, energy): started as it opens, stopped as it
    closes; the probe keeps its own result."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Measurement:
    """What rank 0 measured; throughputs are global samples per second.

    `own_step_ms` is this rank's own work per timed step (see `TrainStep.own_clock`), `own_step_measure` what it is,
    `phase_ms` this rank's step phases per timed step where the clock times them (metrics/step_phases.py).
    `warmup_*` describe the warm-up that ran: its iterations, its seconds (the first step included), and with
    `--warmup-iters auto` its window throughputs and whether they became stable (None for a fixed warm-up).
    `ablation_s` is the whole sync ablation's seconds, each window's settling step included (a sweep's account of
    where its time went, reporting/time_spent.py).
    """

    iters: int
    global_batch: int
    elapsed_s: float
    first_step_s: float
    window_throughputs: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    loss_first: float | None = None
    loss_last: float | None = None
    window_iters: list[int] = field(default_factory=list)
    warmup_iters: int = 0
    warmup_window_throughputs: list[float] = field(default_factory=list)
    warmup_window_iters: list[int] = field(default_factory=list)
    warmup_stable: bool | None = None
    warmup_s: float | None = None
    own_step_ms: list[float] = field(default_factory=list)
    own_step_measure: str = "step"
    phase_ms: dict[str, list[float]] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)  # the step's parameters, gradient bytes, own measures
    compile_s: float | None = None  # ahead-of-time compile time, where the step was compiled before its first run
    # `--ablate sync`: after the timed window, windows without gradient synchronisation and synchronised windows
    # paired with them (alternating)
    ablation_window_throughputs: list[float] = field(default_factory=list)
    ablation_synced_window_throughputs: list[float] = field(default_factory=list)
    ablation_s: float | None = None

    @property
    def throughput(self) -> float:
        return self.global_batch * self.iters / self.elapsed_s


def _auto_warmup(
    step: TrainStep, engine: Engine, output: Any, window: int, max_iters: int, global_batch: int
) -> tuple[Any, int, list[float], list[int], bool]:
    """Warm-up windows of `window` steps until the last K are stable (metrics/steady.is_stable) or `max_iters` more
    steps ran. Rank 0's windows decide, and every rank follows its decision (one gather per warm-up window), so no
    rank leaves the warm-up alone."""
    windows: list[float] = []
    lengths: list[int] = []
    done = 0
    stable = False
    while done < max_iters and not stable:
        n = min(window, max_iters - done)
        engine.sync(output)
        start = time.perf_counter()
        for _ in range(n):
            output = step.run()
        engine.sync(output)
        windows.append(global_batch * n / (time.perf_counter() - start))
        lengths.append(n)
        done += n
        stable = engine.gather(is_stable(windows, DEFAULT_TOLERANCE, DEFAULT_WINDOWS))[0]
    return output, done, windows, lengths, stable


def _window(step: TrainStep, engine: Engine, steps: int, global_batch: int) -> float:
    """One window of `steps` steps between barriers, after one untimed step (the first after a change of mode:
    DDP's first forward under no_sync() still broadcasts buffers, its first backward after it reduces what
    accumulated): its samples/s."""
    engine.sync(step.run())
    engine.barrier()
    started = time.perf_counter()
    for _ in range(steps):
        output = step.run()
    engine.sync(output)
    engine.barrier()
    return global_batch * steps / (time.perf_counter() - started)


def _ablation_windows(
    step: TrainStep, engine: Engine, iters: int, print_every: int, global_batch: int
) -> tuple[list[float], list[float]]:
    """`iters` steps without gradient synchronisation and `iters` with it, in pairs of windows of `print_every`,
    the unsynchronised window first in every other pair: a load that drifts meanwhile slows both alike, and
    neither mode always follows the other, so their ratio holds where two runs at two times would not. Returns
    the unsynchronised windows' and the paired synchronised windows' samples/s, pair by pair."""
    assert step.no_sync is not None
    unsynced: list[float] = []
    synced: list[float] = []
    for pair, done in enumerate(range(0, iters, print_every)):
        steps = min(print_every, iters - done)
        for unsynchronised in (pair % 2 == 0, pair % 2 == 1):
            with step.no_sync() if unsynchronised else nullcontext():
                (unsynced if unsynchronised else synced).append(_window(step, engine, steps, global_batch))
    return unsynced, synced


@dataclass
class _Warmup:
    """What the warm-up did: its steps (the first included) and, for `auto`, its windows and whether they settled."""

    done: int
    windows: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    stable: bool | None = None


def _warm_up(
    step: TrainStep, engine: Engine, output: Any, warmup_iters: int | str, window: int, max_iters: int, batch: int
) -> tuple[Any, _Warmup]:
    """The warm-up after the first step: `auto` windows until stable, or the given count of untimed steps."""
    if warmup_iters == "auto":
        output, done, windows, lengths, stable = _auto_warmup(step, engine, output, window, max_iters, batch)
        return output, _Warmup(1 + done, windows, lengths, stable)
    for _ in range(int(warmup_iters) - 1):
        output = step.run()
    return output, _Warmup(int(warmup_iters))


@dataclass
class _Timed:
    """The timed steps' windows (samples/s and steps each), per-step times by both clocks, the last loss read."""

    windows: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    own_ms: list[float] = field(default_factory=list)
    loss_last: Any = None
    elapsed_s: float = 0.0


def _timed_steps(
    step: TrainStep,
    engine: Engine,
    clock: StepClock,
    iters: int,
    print_every: int,
    global_batch: int,
    on_window: WindowCallback | None,
) -> tuple[Any, _Timed]:
    """`iters` steps, the device synchronised only at window edges (every `print_every` steps and the last)."""
    own_clock = step.own_clock
    timed = _Timed()
    t0 = window_start = time.perf_counter()
    clock.start()
    if own_clock:
        own_clock.start()
    output = None
    done_in_window = 0
    for iteration in range(1, iters + 1):
        output = step.run()
        clock.mark()
        if own_clock:
            own_clock.mark()
        done_in_window += 1
        if iteration % print_every and iteration != iters:
            continue
        timed.loss_last = step.read_loss(output)
        engine.sync(output)
        window_s = time.perf_counter() - window_start
        _close_window(timed, clock, own_clock, done_in_window, global_batch * done_in_window / window_s)
        if on_window:
            ms_per_step = window_s * 1000 / done_in_window
            on_window(WindowLine(iteration, iters, timed.loss_last, timed.windows[-1], ms_per_step, time.time()))
        window_start, done_in_window = time.perf_counter(), 0
    engine.sync(output)
    engine.barrier()
    timed.elapsed_s = time.perf_counter() - t0
    return output, timed


def _close_window(
    timed: _Timed, clock: StepClock, own_clock: StepClock | None, steps: int, samples_per_s: float
) -> None:
    timed.windows.append(samples_per_s)
    timed.lengths.append(steps)
    timed.step_ms.extend(clock.collect())
    if own_clock:
        timed.own_ms.extend(own_clock.collect())


def timed_loop(
    step: TrainStep,
    engine: Engine,
    *,
    warmup_iters: int | str,
    iters: int,
    print_every: int,
    global_batch: int,
    max_warmup_iters: int = 0,
    on_window: WindowCallback | None = None,
    on_warmup: WarmupCallback | None = None,
    probes: Sequence[WindowProbe] = (),
    ablate: str = "off",
) -> Measurement:
    """Run the warm-up, then `iters` timed steps; each probe is started and stopped around the timed steps.

    `warmup_iters` is a count of untimed steps (the first included), or "auto": after the first step, warm-up
    windows of `print_every` steps until K are stable, at most `max_warmup_iters` steps. The device is synchronised
    only at window edges (every `print_every` steps), where the loss is read too (by `step.read_loss`, which every
    rank calls there and nowhere else); per-step latency comes from the engine's step clock without a sync per step.
    """
    started = time.perf_counter()
    output = step.run()
    loss_first = step.read_loss(output)  # reading the loss waits for the first step: start-up and compiling
    engine.sync(output)
    first_step_s = time.perf_counter() - started
    output, warm = _warm_up(step, engine, output, warmup_iters, print_every, max_warmup_iters, global_batch)
    clock = engine.clock()
    own_clock = step.own_clock
    engine.sync(output)
    # the timed steps' peak: the allocator's cache is released first, so neither peak holds the warm-up's cuDNN
    # benchmarking or autotuning workspaces
    engine.reset_peak_memory()
    warmup_s = time.perf_counter() - started
    if on_warmup:  # the live view tells start-up and compiling apart from the timed windows
        on_warmup(WarmupLine(warm.done, first_step_s, warmup_s, time.time(), step.compile_s))
    for probe in probes:  # before the barrier, so no rank's timed window holds another's snapshot
        probe.start()
    engine.barrier()
    _, timed = _timed_steps(step, engine, clock, iters, print_every, global_batch, on_window)
    for probe in reversed(probes):  # last started, first stopped: the energy meter sits closest to the window
        probe.stop()
    ablation: tuple[list[float], list[float]] = ([], [])
    ablation_started = time.perf_counter()
    if ablate == "sync" and step.no_sync is not None:
        ablation = _ablation_windows(step, engine, iters, print_every, global_batch)
    return Measurement(
        iters=iters,
        global_batch=global_batch,
        elapsed_s=timed.elapsed_s,
        first_step_s=first_step_s,
        window_throughputs=timed.windows,
        step_ms=timed.step_ms,
        loss_first=loss_first,
        loss_last=timed.loss_last,  # the last iteration always closes a window
        window_iters=timed.lengths,
        warmup_iters=warm.done,
        warmup_window_throughputs=warm.windows,
        warmup_window_iters=warm.lengths,
        warmup_stable=warm.stable,
        warmup_s=warmup_s,
        own_step_ms=timed.own_ms if own_clock else timed.step_ms,
        own_step_measure=step.own_measure if own_clock else "step",
        phase_ms=own_clock.phases() if own_clock else {},
        model=dict(step.model),
        compile_s=step.compile_s,
        ablation_window_throughputs=ablation[0],
        ablation_synced_window_throughputs=ablation[1],
        ablation_s=time.perf_counter() - ablation_started if ablation[0] else None,
    )
