"""Runs from the parent's side: check a spec once, plan its runs, launch them, write each record as produced."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlperf.engines import engine_class
from dlperf.launch import Launcher, LaunchOptions, RunJob, launcher_for
from dlperf.launch.messages import RunResult
from dlperf.orchestration.record import build_record
from dlperf.records.paths import run_paths
from dlperf.records.schema import READABLE, read_record
from dlperf.records.store import claim_paths, write_json_atomic
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, check_spec, get_workload

OnRecord = Callable[[RunJob, dict[str, Any]], None]


def check_run(spec: RunSpec, launcher: Launcher) -> WorkloadPlan:
    """Every check that can run before a process starts, once; returns the plan every later step reads."""
    launcher.options.validate()
    plan = check_spec(spec)
    launcher.check(spec)
    engine_class(spec.engine)().preflight(spec, local=launcher.local)
    return plan


def plan_jobs(spec: RunSpec, plan: WorkloadPlan, repeats: list[int], out: str | Path) -> list[RunJob]:
    return [RunJob(spec, plan, r, run_paths(out, spec.model, spec.topology, plan.stem, r)) for r in repeats]


def execute(
    jobs: list[RunJob],
    launcher: Launcher,
    env: dict[str, Any],
    *,
    overwrite: bool,
    on_record: OnRecord | None = None,
) -> list[dict[str, Any]]:
    """Launch the jobs (one by one, or submitted together) and write each record atomically as it comes;
    a failed run is a record too, never an exception."""
    for job in jobs:
        claim_paths(job.paths, overwrite)
    records: list[dict[str, Any]] = []
    started = time.time()

    def done(job: RunJob, result: RunResult | None) -> None:
        nonlocal started
        schema = get_workload(job.spec.model).record_schema
        record = read_record(job.paths.record, (schema,) if schema else READABLE) if result is None else None
        if record is None:
            result = result or RunResult.failed(f"the run wrote no record at {job.paths.record}")
            record = build_record(job, result, env, started, time.time())
            write_json_atomic(job.paths.record, record)
        records.append(record)
        if on_record:
            on_record(job, record)
        started = time.time()

    launcher.run_all(jobs, done)
    return records


__all__ = ["LaunchOptions", "check_run", "execute", "launcher_for", "plan_jobs"]
