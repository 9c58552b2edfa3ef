"""The body of every rank: set up the engine, build the workload's step once, time it, gather every rank's facts."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from dlperf.engines import get_engine
from dlperf.engines.base import Engine, RankEnv, TrainStep, node_name
from dlperf.harness.loop import Measurement, timed_loop
from dlperf.harness.probes import EnergyProbe, LoadProbe
from dlperf.harness.results import RankFacts, RunMeasurement
from dlperf.machine.gpus import visible_gpu_ids
from dlperf.records.codec import dump
from dlperf.records.parts import Kind
from dlperf.records.runlog import RunLogWriter
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, decode_spec, get_workload


def build_step(spec: RunSpec, plan: WorkloadPlan, engine: Engine) -> TrainStep:
    """The workload's step on this rank's (set-up) engine."""
    return get_workload(spec.model).builder(spec.engine)(spec, plan, engine)


def count_flops(step: TrainStep) -> tuple[int | None, str | None]:
    """The step's counted FLOPs per iteration, or None with the reason; a count that fails never fails the run."""
    if step.count_flops is None:
        return None, "this workload's step does not count its FLOPs on this engine"
    try:
        return step.count_flops(), None
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as error:
        return None, f"FLOP counting failed: {type(error).__name__}: {error}"


def run_rank(run: dict[str, Any], log_path: str, kind: Kind) -> dict[str, Any] | None:
    """Run one benchmark of its kind (the timed loop, or a task run's rank task) on this rank; rank 0 returns the
    measurement (a RunMeasurement as the codec's plain values), others None.

    Each node's local rank 0 meters the node (machine load, energy) over the timed window; every rank times its
    own work per step, gathered with the other facts once at the end. The start-up runs without the garbage
    collector (`_start_collecting`).
    """
    gc.disable()
    try:
        return _run_rank(run, log_path, kind)
    finally:
        gc.enable()


def _start_collecting() -> None:
    """The collector back on, after one full collection, before the rank's work: the framework's import and the
    model's build, which make millions of long-lived objects, ran without it (their full collections cost 0.3 to 0.4 s
    of a CPU's start-up, issue 55), and the work meets a collector as in any script, its start-up garbage gone."""
    gc.enable()
    gc.collect()


def _run_rank(run: dict[str, Any], log_path: str, kind: Kind) -> dict[str, Any] | None:
    spec = decode_spec(run)
    plan = get_workload(spec.model).plan(spec)
    rank = RankEnv.from_environ()
    engine = get_engine(spec.engine)
    engine.setup(spec, rank)
    engine.reset_peak_memory()
    log = RunLogWriter(log_path) if rank.rank == 0 else None
    load, energy = _node_probes(rank, engine)
    try:
        if log:
            log.config({**spec.to_dict(), "global_batch_size": plan.global_batch, "world_size": rank.world_size})
        work = _work(spec, plan, engine, rank, log, [load, energy] if load else [], kind)
        ranks = engine.gather(_facts(rank, engine, work.measurement, load, energy))
    finally:
        if log:
            log.close()
        engine.shutdown()
    if rank.rank != 0:
        return None
    return dump(RunMeasurement(work.measurement, ranks, engine.device_type, work.flops, work.flops_note, work.output))


def _node_probes(rank: RankEnv, engine: Engine) -> tuple[LoadProbe | None, EnergyProbe | None]:
    """The node's machine-load and energy meters, on its local rank 0 only."""
    if rank.local_rank != 0:
        return None, None
    devices = visible_gpu_ids(rank.local_world_size, engine.device_uuids()) if engine.device_type == "cuda" else []
    return LoadProbe(devices), EnergyProbe(engine.device_type, devices)


@dataclass(frozen=True)
class _RankWork:
    """What this rank's work gave: the timed loop's measurement, or a rank task's output; rank 0's FLOP count."""

    measurement: Measurement | None = None
    output: Any = None
    flops: int | None = None
    flops_note: str | None = None


def _work(
    spec: RunSpec, plan: WorkloadPlan, engine: Engine, rank: RankEnv, log: RunLogWriter | None, probes: list, kind: Kind
) -> _RankWork:
    """A task run's rank task (commbench's), else the workload's step built and timed."""
    if kind == "task":
        _start_collecting()
        return _RankWork(output=get_workload(spec.model).task(spec.engine)(spec, plan, engine))
    step = build_step(spec, plan, engine)
    _start_collecting()
    measurement = timed_loop(
        step,
        engine,
        warmup_iters=spec.warmup_iters,
        max_warmup_iters=spec.max_warmup_iters,
        iters=spec.iters,
        print_every=spec.window,
        global_batch=plan.global_batch,
        on_window=log.window if log else None,
        on_warmup=log.warmup if log else None,
        probes=[*probes, *step.probes],
        ablate=spec.ablate,
    )
    flops, note = count_flops(step) if rank.rank == 0 else (None, None)
    return _RankWork(measurement, None, flops, note)


def _facts(
    rank: RankEnv,
    engine: Engine,
    measurement: Measurement | None,
    load: LoadProbe | None,
    energy: EnergyProbe | None,
) -> RankFacts:
    """This rank's facts for the gather: where it ran, its memory, its own step times and its node's meters."""
    return RankFacts(
        rank.rank,
        node_name(),
        engine.device_name(),
        engine.peak_memory_mib(),
        local_rank=rank.local_rank,
        own_step_ms=measurement.own_step_ms if measurement else [],
        phase_ms=measurement.phase_ms if measurement else {},
        machine_load=load.result if load else None,
        energy=energy.result if energy else None,
        cpu_threads=engine.cpu_threads(),
    )
