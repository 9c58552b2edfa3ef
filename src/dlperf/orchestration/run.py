"""Runs from the parent's side: check a spec once, plan its runs, launch them, write each record as produced."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.engines import engine_host, engine_versions
from dlperf.errors import ResultsError
from dlperf.launch import Launcher, LaunchOptions, RunJob, launcher_for
from dlperf.launch.messages import RunResult
from dlperf.machine.environment import collect_environment
from dlperf.orchestration.kinds import build_record, kind_of, require_training
from dlperf.orchestration.preflight import preflight_warning
from dlperf.records.load import Record, load_record
from dlperf.records.lock import results_lock
from dlperf.records.paths import run_paths
from dlperf.records.schema import READABLE
from dlperf.records.store import check_free_space, check_writable, claim_paths, removed_if_refused
from dlperf.records.written import record_json, with_fields, write_record
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, check_spec, get_workload, spec_from_mapping

OnRecord = Callable[[RunJob, Record], None]
Decide = Callable[[Record], dict[str, Any]]  # fields decided from a record, written with it in one write
# What one run writes, generously: its record and console (with the environment), plus a log line per window.
RUN_FILES_BYTES = 256 * 1024
LOG_LINE_BYTES = 512


def share_cpu(specs: list[RunSpec]) -> list[RunSpec]:
    """Each spec's `cpu_threads` auto made this machine's cores divided by the most devices per node among
    `specs` (the cases of one sweep, or one run), so every topology gives a CPU device the same share."""
    most = max((spec.devices_per_node for spec in specs), default=1)
    cores = len(os.sched_getaffinity(0))
    return [spec.sharing_cpu(most, cores) for spec in specs]


def training_spec(values: Mapping[str, Any], launch: LaunchOptions) -> RunSpec:
    """The spec of a training run from its keys as given (flags or YAML), placed where `launch` says (the hosts
    decide the nodes and devices per node the keys leave open); a measurement of its own (commbench) is refused,
    naming its command."""
    spec = spec_from_mapping(launch.place(values))
    require_training(spec)
    return spec


def check_run(spec: RunSpec, launcher: Launcher) -> WorkloadPlan:
    """Every check of the spec that needs no framework, once; returns the plan every later step reads. The
    engine's own checks (`preflight`) import its framework, seconds on a loaded machine: the caller runs them
    after its cheap refusals (an existing record, a folder in use)."""
    launcher.options.validate()
    plan = check_spec(spec)
    launcher.check(spec)
    kind_of(spec).check(spec, plan)
    return plan


def preflight(specs: list[RunSpec], launcher: Launcher) -> None:
    """Each engine's check of the devices, precisions and packages the specs ask for."""
    for spec in specs:
        for name in kind_of(spec).engines(spec):
            engine_host(name).preflight(spec, local=launcher.local)


def versions(specs: list[RunSpec]) -> dict[str, Any]:
    """The versions of the engines the specs load, for the records' environment."""
    return engine_versions(sorted({name for spec in specs for name in kind_of(spec).engines(spec)}))


def plan_jobs(spec: RunSpec, plan: WorkloadPlan, repeats: list[int], out: str | Path) -> list[RunJob]:
    kind = kind_of(spec)
    return [kind.job(spec, plan, r, run_paths(out, spec.model, spec.topology, plan.stem, r)) for r in repeats]


def output_bytes(job: RunJob) -> int:
    """About how much one run writes, to check free space before the first run starts."""
    return RUN_FILES_BYTES + LOG_LINE_BYTES * (job.spec.iters // job.spec.window + 1)


def execute(
    jobs: list[RunJob],
    launcher: Launcher,
    env: dict[str, Any],
    *,
    overwrite: bool,
    on_record: OnRecord | None = None,
    fields: dict[str, Any] | None = None,
    decide: Decide | None = None,
) -> list[Record]:
    """Launch the jobs (one by one, or submitted together) and write each record atomically as it comes;
    a failed run is a record too, never an exception. `fields` (a sweep's id) go into every record, those a job
    wrote itself (sbatch) too; `decide`'s fields (the repeats decision) are written in the same atomic write as the
    record, so no interruption leaves a record without its decision. Holds the results folder's write lock."""
    with contextlib.ExitStack() as locks:
        for root in sorted({job.paths.root for job in jobs}):
            locks.enter_context(results_lock(root))
        for job in jobs:
            claim_paths(job.paths, overwrite)
        for root in {job.paths.root for job in jobs}:
            check_free_space(root, sum(output_bytes(job) for job in jobs if job.paths.root == root))
        records: list[Record] = []
        started = time.time()

        def done(job: RunJob, result: RunResult | None) -> None:
            nonlocal started
            schema = get_workload(job.spec.model).record_schema
            written = load_record(job.paths.record, (schema,) if schema else READABLE) if result is None else None
            if written is None:
                result = result or RunResult.failed(f"the run wrote no record at {job.paths.record}")
            record = with_fields(written or build_record(job, result, env, started, time.time()), fields or {})
            record = with_fields(record, decide(record) if decide else {})
            if written is None or record_json(record) != record_json(written):
                record = write_record(job.paths.record, record)
            records.append(record)
            if on_record:
                on_record(job, record)
            started = time.time()

        launcher.run_all(jobs, done)
    return records


@dataclass(frozen=True)
class RunHooks:
    """What the caller shows while `run_one` goes: the dry run's lines (its exact commands, printed as they are: a
    shell reads them), each line it has to say (a warning), and a context around the run itself (the CLI follows
    its log there)."""

    say: Callable[[str], None] = lambda line: None
    dry_run_lines: Callable[[str], None] = print
    around: Callable[[RunJob, Launcher, dict[str, Any]], contextlib.AbstractContextManager] = (
        lambda job, launcher, env: contextlib.nullcontext()
    )


def refuse_early(job: RunJob, overwrite: bool) -> None:
    """What execute() would refuse after the environment is collected (a minute), refused now."""
    existing = [p for p in (job.paths.log, job.paths.record) if p.exists()]
    if existing and not overwrite:
        raise ResultsError(f"{existing[0]} already exists: pass --overwrite to replace it, or another --out")
    with results_lock(job.paths.root):  # another writer holds the folder: refused here, taken again to run
        pass


def run_one(
    spec: RunSpec,
    launch: LaunchOptions,
    out: str | Path,
    *,
    repeat: int = 1,
    overwrite: bool = False,
    force: bool = False,
    hooks: RunHooks = RunHooks(),
) -> Record | None:
    """One run of `spec`, start to record: checked and planned once; with --dry-run its commands said and None
    returned; else the refusals that need no framework first (the folder, an earlier record), the engine's checks,
    the environment, then the run, its record written atomically and returned as its declared kind (a failed run
    is a record too)."""
    launcher = launcher_for(launch)
    (spec,) = share_cpu([spec])
    plan = check_run(spec, launcher)
    (job,) = plan_jobs(spec, plan, [repeat], out)
    if launch.dry_run:
        preflight([spec], launcher)
        hooks.dry_run_lines(launcher.describe_all([job]))
        return None
    with removed_if_refused(check_writable(out)):
        refuse_early(job, overwrite)
        preflight([spec], launcher)  # imports the framework: after the refusals that need none
        env = {**collect_environment(), **versions([spec])}
        warning = preflight_warning(spec, plan, env, force) if launcher.local else None
    if warning:
        hooks.say(warning)
    with hooks.around(job, launcher, env):
        return execute([job], launcher, env, overwrite=overwrite)[0]
