"""The body of every rank: set up the engine, build the workload's step once, time it, gather every rank's facts."""

from __future__ import annotations

from typing import Any

from dlperf.engines import get_engine
from dlperf.engines.base import Engine, RankEnv, node_name
from dlperf.harness.loop import Measurement, WindowCallback, timed_loop
from dlperf.harness.results import RankFacts, RunMeasurement
from dlperf.records.runlog import RunLogWriter
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, decode_spec, get_workload


def time_spec(
    spec: RunSpec, plan: WorkloadPlan, engine: Engine, on_window: WindowCallback | None = None
) -> Measurement:
    """Build the workload's step on this rank's (set-up) engine and time it with the spec's warm-up and windows."""
    step = get_workload(spec.model).builder(spec.engine)(spec, plan, engine)
    return timed_loop(
        step,
        engine,
        warmup_iters=spec.warmup_iters,
        iters=spec.iters,
        print_every=spec.window,
        global_batch=plan.global_batch,
        on_window=on_window,
    )


def run_rank(run: dict[str, Any], log_path: str) -> dict[str, Any] | None:
    """Run one benchmark on this rank; rank 0 returns the measurement (RunMeasurement.to_dict()), others None."""
    spec = decode_spec(run)
    plan = get_workload(spec.model).plan(spec)
    rank = RankEnv.from_environ()
    engine = get_engine(spec.engine)
    engine.setup(spec, rank)
    engine.reset_peak_memory()
    log = RunLogWriter(log_path) if rank.rank == 0 else None
    try:
        if log:
            log.config({**spec.to_dict(), "global_batch_size": plan.global_batch, "world_size": rank.world_size})
        workload = get_workload(spec.model)
        measurement, output = None, None
        if workload.tasks:  # a rank task of its own instead of the timed loop (commbench)
            output = workload.task(spec.engine)(spec, plan, engine)
        else:
            measurement = time_spec(spec, plan, engine, log.window if log else None)
        facts = RankFacts(rank.rank, node_name(), engine.device_name(), engine.peak_memory_mib())
        ranks = engine.gather(facts)
    finally:
        if log:
            log.close()
        engine.shutdown()
    if rank.rank != 0:
        return None
    return RunMeasurement(measurement, ranks, engine.device_type, output).to_dict()
