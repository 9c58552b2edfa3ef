"""Sweeps: a YAML matrix of cases, each repeated, run one after another with resume.

The YAML holds run keys (the shared ones and the model's own). A key whose value is a list is a matrix axis;
`topology` takes names like `1n8g` (or a list of them); `repeats` sets the repeat count, or `auto`: repeat each case
until the 95 % interval of its median is within `target_ci` percent (default 1), at least 3 and at most
`max_repeats` times (metrics/repeats.should_stop); each record then says in `repeats_stop` why it stopped or not.
`matrix:` may list sub-matrices, each merged over the top-level keys and expanded on its own (e.g. fp32 at batch
128 and 160, AMP at 256).
Examples: configs/quick.yaml, configs/resnet50_report.yaml.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.launch import Launcher, RunJob
from dlperf.machine.environment import collect_environment
from dlperf.metrics.repeats import DEFAULT_MAX_REPEATS, DEFAULT_TARGET_CI, MIN_REPEATS, should_stop
from dlperf.orchestration.kinds import NATIVE, kind_of, require_training
from dlperf.orchestration.preflight import FORCE_HELP, preflight_warning
from dlperf.orchestration.run import Decide, OnRecord, check_run, execute, plan_jobs, preflight, share_cpu, versions
from dlperf.orchestration.sweep_file import check_run_count, load_sweep_file
from dlperf.records.codec import dump
from dlperf.records.load import Record, RecordLike, as_record, load_record
from dlperf.records.lock import results_lock
from dlperf.records.parts import RepeatsStop
from dlperf.records.paths import run_paths
from dlperf.records.store import check_writable
from dlperf.records.validate import check_file, job_problem
from dlperf.reporting.report import refuse_to_replace, write_report
from dlperf.spec import RunSpec, file_keys, parse_topology, setting
from dlperf.workloads import WorkloadPlan, spec_from_mapping

DEFAULT_REPEATS = 5
AUTO = "auto"


@dataclass(frozen=True)
class SweepOptions:
    """What `dlperf sweep` is asked, in one object: the file, the results folder, the repeat rule (None: the
    file's keys, which these override) and what to do with the records already there."""

    config: str | None = setting(
        None,
        "sweep YAML file, e.g. configs/quick.yaml (with --resume: default the copy the folder keeps)",
        positional="?",
    )  # None for a matrix given as a mapping
    out: str | None = setting(
        None,
        "results folder (default results/<the sweep file's name>: results/quick for configs/quick.yaml, so two "
        "sweep files never share a folder; --resume needs it given)",
        bound="non-empty",
    )
    # the repeat rule shapes the sweep, so --resume takes it from the folder (stored)
    repeats: int | str | None = setting(
        None,
        "repeats per case, or `auto`: until the 95% interval of the median is within --target-ci (default: the "
        "file's `repeats`, else 5)",
        bound="positive or auto",
        stored=True,
    )
    target_ci: float | None = setting(
        None,
        "with --repeats auto: target half-width of the median's 95% interval, in percent (default 1)",
        bound="positive",
        metavar="PCT",
        stored=True,
    )
    max_repeats: int | None = setting(
        None, "with --repeats auto: most repeats per case (default 10)", bound="positive", stored=True
    )
    resume: bool = setting(
        False,
        "finish the sweep in --out with the options it started with (stored in OUT/sweep_options.json): skip runs "
        "whose record is complete; rerun the rest",
    )
    retry_failed: bool = setting(False, "with --resume, also rerun failed runs")
    overwrite: bool = setting(False, "replace the records of an earlier sweep")
    force: bool = setting(False, FORCE_HELP)  # start cases over the machine's memory (preflight refuses them)


def default_out(config: str | Path) -> str:
    """A sweep's folder where --out is not given: results/<the file's stem> (results/quick for configs/quick.yaml),
    one folder per sweep file, as `dlperf report` reads one sweep per folder."""
    return str(Path("results") / Path(config).stem)


def stored_sweep_fields() -> list[str]:
    """The SweepOptions a sweep's folder keeps for --resume (besides the launch flags)."""
    return [f.name for f in fields(SweepOptions) if f.metadata.get("stored")]


@dataclass(frozen=True)
class AdaptiveRepeats:
    """`--repeats auto`: the target half-width of the median's interval (a fraction) and the most repeats."""

    target_ci: float = DEFAULT_TARGET_CI
    max_repeats: int = DEFAULT_MAX_REPEATS

    def decide(self, throughputs: list[float]) -> RepeatsStop:
        return should_stop(throughputs, self.target_ci, self.max_repeats)


@dataclass
class SweepPlan:
    cases: list[tuple[RunSpec, WorkloadPlan]]
    repeats: int  # the count, or with `adaptive` the most repeats per case
    adaptive: AdaptiveRepeats | None = None

    def jobs(self, out: str | Path) -> list[RunJob]:
        """Table by table (model and group, in plan order); within a table the repeats take turns, every case's
        first repeat, then every case's second...: a machine whose load drifts during a table slows its cases alike,
        where case after case would put the drift into the speedup."""
        tables: dict[tuple[str, str], list[tuple[RunSpec, WorkloadPlan]]] = {}
        for spec, plan in self.cases:
            tables.setdefault((spec.model, plan.group), []).append((spec, plan))
        return [
            job
            for cases in tables.values()
            for repeat in range(1, self.repeats + 1)
            for spec, plan in cases
            for job in plan_jobs(spec, plan, [repeat], out)
        ]


def _adaptive(target_pct: Any, max_repeats: Any) -> AdaptiveRepeats:
    """The adaptive-repeat settings, checked: target in percent (0, 100), at least 3 repeats."""
    target_pct = DEFAULT_TARGET_CI * 100 if target_pct is None else target_pct
    max_repeats = DEFAULT_MAX_REPEATS if max_repeats is None else max_repeats
    if isinstance(target_pct, bool) or not isinstance(target_pct, (int, float)) or not 0 < target_pct < 100:
        raise ConfigError(f"--target-ci must be a percentage between 0 and 100, got {target_pct!r}")
    if isinstance(max_repeats, bool) or not isinstance(max_repeats, int) or max_repeats < MIN_REPEATS:
        raise ConfigError(f"--max-repeats must be an integer of at least {MIN_REPEATS}, got {max_repeats!r}")
    return AdaptiveRepeats(target_pct / 100, max_repeats)


def plan_sweep_file(options: SweepOptions, launcher: Launcher) -> SweepPlan:
    """The plan of the sweep file `options.config`."""
    return plan_sweep(load_sweep_file(str(options.config)), launcher, options)


def plan_sweep(spec: dict[str, Any], launcher: Launcher, options: SweepOptions | None = None) -> SweepPlan:
    """Expand the matrix into validated cases; every case is checked before anything runs.

    With a host list and no topology or nodes in the file, every case spans all the hosts; a hostfile whose hosts
    all give `slots=N` sets the processes per node where the file does not. The options' `repeats`, `target_ci`
    (percent) and `max_repeats` (the command line's) win over the file's keys of the same names. A case's bad
    value is refused naming the file and spelling its key as the file does (`batch_size`, not `--batch-size`).
    """
    options = options or SweepOptions()
    repeats, target_ci, max_repeats = options.repeats, options.target_ci, options.max_repeats
    spec = launcher.options.place(spec)
    spec_repeats = spec.pop("repeats", DEFAULT_REPEATS)
    spec_target, spec_max = spec.pop("target_ci", None), spec.pop("max_repeats", None)
    repeats = repeats if repeats is not None else spec_repeats
    adaptive = None
    if repeats == AUTO:
        adaptive = _adaptive(target_ci if target_ci is not None else spec_target, max_repeats or spec_max)
        repeats = adaptive.max_repeats
    elif target_ci is not None or max_repeats is not None:
        raise ConfigError("--target-ci and --max-repeats apply to --repeats auto only: add --repeats auto")
    with _faults_named_by(options.config):
        return SweepPlan(cases=_cases(spec, repeats, launcher), repeats=repeats, adaptive=adaptive)


@contextlib.contextmanager
def _faults_named_by(source: str | None) -> Iterator[None]:
    """The file's own values checked with their keys spelled as the file spells them (`batch_size`, not
    `--batch-size`), a fault naming the file."""
    try:
        with file_keys():
            yield
    except ConfigError as error:
        if source is None:
            raise
        raise ConfigError(f"sweep file {source}: {error}") from None


def _cases(spec: dict[str, Any], repeats: int, launcher: Launcher) -> list[tuple[RunSpec, WorkloadPlan]]:
    """Every sub-matrix's cases, each checked; two cases writing the same files are refused."""
    check_run_count(spec, repeats)
    variants = spec.pop("matrix", [{}])
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants) or not variants:
        raise ConfigError("`matrix` must be a list of mappings, each a sub-matrix of keys and values")
    cases: list[tuple[RunSpec, WorkloadPlan]] = []
    seen: set[Path] = set()
    for variant in variants:
        for run_spec, plan in _expand({**spec, **variant}, launcher):
            key = run_paths("", run_spec.model, run_spec.topology, plan.stem, 1).record
            if key in seen:
                raise ConfigError(f"two sweep cases write the same files ({key}): make the matrix values distinct")
            seen.add(key)
            cases.append((run_spec, plan))
    shared = share_cpu([run_spec for run_spec, _ in cases])  # one CPU share for every topology of the sweep
    return [(run_spec, plan) for run_spec, (_, plan) in zip(shared, cases)]


def _expand(spec: dict[str, Any], launcher: Launcher) -> Iterator[tuple[RunSpec, WorkloadPlan]]:
    """One sub-matrix: the cartesian product of its list-valued keys, each case checked."""
    spec = _topology_axis(dict(spec))
    axes = {k: v for k, v in spec.items() if isinstance(v, list)}
    for key, values in axes.items():
        if not values:
            raise ConfigError(f"sweep key {key!r} has an empty list")
    fixed = {k: v for k, v in spec.items() if k not in axes}
    for combo in itertools.product(*axes.values()):
        values = {**fixed, **dict(zip(axes, combo))}
        if "_topology" in values:
            values["nodes"], values["devices_per_node"] = values.pop("_topology")
        run_spec = spec_from_mapping(values)
        require_training(run_spec)
        plan = check_run(run_spec, launcher)
        yield (replace(run_spec, ablate="sync") if _ablation_by_default(values, run_spec, plan) else run_spec), plan


def _ablation_by_default(values: dict[str, Any], run_spec: RunSpec, plan: WorkloadPlan) -> bool:
    """A sweep's data-parallel case of 2+ devices times the sync ablation unless its file sets `ablate` (`off`
    opts out): without it the waterfall's split of the scaling loss is not measured (docs/scaling.md). It costs
    two times `iters` steps more per run; a step that cannot skip synchronisation records why, at no cost."""
    if "ablate" in values or run_spec.world_size < 2 or kind_of(run_spec) is not NATIVE:
        return False
    layout = plan.layout
    return layout is None or (
        getattr(layout, "dp", None) == run_spec.world_size and getattr(layout, "dp_mode", None) == "ddp"
    )


def _topology_axis(spec: dict[str, Any]) -> dict[str, Any]:
    """`topology` (one or a list) as the axis `_topology` of (nodes, devices per node); refused beside `nodes`."""
    topologies = spec.pop("topology", None)
    if topologies is None:
        return spec
    if {"nodes", "devices_per_node", "devices-per-node"} & set(spec):
        raise ConfigError("give either `topology` or `nodes`/`devices_per_node` in a sweep file, not both")
    topologies = topologies if isinstance(topologies, list) else [topologies]
    return spec | {"_topology": [parse_topology(t) for t in topologies]}


def new_sweep_id() -> str:
    """Sortable and unique: the start time (UTC) and a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def resumed_sweep_id(jobs: list[RunJob]) -> str | None:
    """The id that the records of an interrupted sweep carry, so its resumed runs join it (None if none has)."""
    for job in jobs:
        record = load_record(job.paths.record)
        if record is not None and record.sweep_id:
            return record.sweep_id
    return None


def record_is_complete(job: RunJob, retry_failed: bool) -> bool:
    """Whether --resume may keep the record at the job's path: a valid record of this very run (model, case, group,
    repeat). A broken one, or another run's record there (a copied file), is named and the run measured again."""
    if not job.paths.record.exists():
        return False
    record, problem = check_file(job.paths.record)
    if record is not None:
        problem = job_problem(record, job.spec.model, job.spec.topology, job.plan.group, job.repeat)
    if problem or record is None:
        why = problem or "is no run record"
        print(f"dlperf: {ascii(str(job.paths.record))[1:-1]} {why}: measuring this run again", file=sys.stderr)
        return False
    return as_record(record).status == "ok" or not retry_failed


@dataclass
class SweepOutcome:
    ran: list[Record]
    skipped: int

    @property
    def failed(self) -> list[Record]:
        return [r for r in self.ran if as_record(r).status != "ok"]


@dataclass(frozen=True)
class SweepStart:
    """A sweep ready to run: its jobs, the environment every record carries, its id (a resumed sweep keeps its
    own), and one warning line per case that will not fit this machine."""

    jobs: list[RunJob]
    env: dict[str, Any]
    sweep_id: str
    warnings: list[str]


def sweep_id_for(jobs: list[RunJob], resume: bool) -> str:
    """A new sweep's id, or the one a resumed sweep's records carry."""
    return (resumed_sweep_id(jobs) if resume else None) or new_sweep_id()


def preflight_sweep(plan: SweepPlan, options: SweepOptions, launcher: Launcher) -> None:
    """The engines' checks of every case (they import the frameworks: after the cheap refusals), faults named in
    the sweep file's words."""
    with _faults_named_by(options.config):
        preflight([spec for spec, _ in plan.cases], launcher)


def start_sweep(plan: SweepPlan, options: SweepOptions, launcher: Launcher, sweep_id: str | None = None) -> SweepStart:
    """Refuse to replace another sweep's report (unless resuming or overwriting), check the folder can be
    written, run the engines' checks, capture the environment once; `sweep_id` where the caller has named the
    sweep already."""
    if not (options.resume or options.overwrite):
        refuse_to_replace(options.out, {"md", "json"})
    check_writable(options.out)
    preflight_sweep(plan, options, launcher)
    env = {**collect_environment(), **versions([spec for spec, _ in plan.cases])}
    warnings = [
        w for spec, case in plan.cases if launcher.local and (w := preflight_warning(spec, case, env, options.force))
    ]
    jobs = plan.jobs(options.out)
    return SweepStart(jobs, env, sweep_id or sweep_id_for(jobs, options.resume), warnings)


def finish_sweep(options: SweepOptions, jobs: list[RunJob]) -> Path:
    """The report of this sweep's own records (not whatever else lies below the folder); returns its folder.
    (The sweep file and options were stored beside the records at the start: orchestration/sweep_state.py.)"""
    written = write_report([r for job in jobs if (r := load_record(job.paths.record))], options.out)
    return written[0].parent


@dataclass(frozen=True)
class _Runner:
    """What every run of one sweep shares: where, how, what to do with a finished record, and the fields that go
    into each record."""

    options: SweepOptions
    env: dict[str, Any]
    launcher: Launcher
    on_skip: Callable[[RunJob], None]
    on_record: OnRecord
    fields: dict[str, Any] | None

    def done_before(self, job: RunJob) -> bool:
        return self.options.resume and record_is_complete(job, self.options.retry_failed)

    def execute(self, jobs: list[RunJob], decide: Decide | None = None) -> list[Record]:
        """Run `jobs`; `decide` adds the repeats decision to each record before its one write."""
        return execute(
            jobs, self.launcher, self.env, overwrite=True, on_record=self.on_record, fields=self.fields, decide=decide
        )


def run_sweep(
    plan: SweepPlan,
    options: SweepOptions,
    env: dict[str, Any],
    launcher: Launcher,
    *,
    on_skip: Callable[[RunJob], None],
    on_record: OnRecord,
    sweep_id: str | None = None,
) -> SweepOutcome:
    """Run every case and repeat; records land as they are produced, so an interrupted sweep resumes.
    Every record carries `sweep_id`, so a report can keep two sweeps under one folder apart. One sweep at a time
    per results folder: the lock covers the resume decision and every run (`sweep.sweep_to_report` has refused an
    earlier sweep's records unless resuming or overwriting)."""
    out = options.out
    with results_lock(out):
        jobs = plan.jobs(out)
        fields = {"sweep_id": sweep_id} if sweep_id else None
        runner = _Runner(options, env, launcher, on_skip, on_record, fields)
        if plan.adaptive:
            return _run_adaptive(plan, plan.adaptive, runner)
        todo = []
        skipped = 0
        for job in jobs:
            if runner.done_before(job):
                skipped += 1
                on_skip(job)
            else:
                todo.append(job)
        return SweepOutcome(ran=runner.execute(todo), skipped=skipped)


def _ok_throughput(data: RecordLike | None) -> float | None:
    record = as_record(data) if data else None
    if record is not None and record.status == "ok" and isinstance(record.throughput, (int, float)):
        return float(record.throughput)
    return None


def _run_adaptive(plan: SweepPlan, adaptive: AdaptiveRepeats, runner: _Runner) -> SweepOutcome:
    """Each case repeated until `adaptive` says stop; every new record gets `repeats_stop`, the decision after it
    (written with the record in one atomic write), so the case's last record says why it stopped."""
    ran: list[Record] = []
    skipped = 0
    for spec, case_plan in plan.cases:
        jobs = plan_jobs(spec, case_plan, list(range(1, adaptive.max_repeats + 1)), runner.options.out)
        case_ran, case_skipped = _repeat_case(jobs, adaptive, runner)
        ran += case_ran
        skipped += case_skipped
    return SweepOutcome(ran=ran, skipped=skipped)


def _repeat_case(jobs: list[RunJob], adaptive: AdaptiveRepeats, runner: _Runner) -> tuple[list[Record], int]:
    """One case's repeats, in order, until the decision after one of them says stop."""
    ran: list[Record] = []
    skipped = 0
    throughputs: list[float] = []
    decision: RepeatsStop | None = None

    def decide(record: Record) -> dict[str, Any]:
        nonlocal decision
        value = _ok_throughput(record)
        if value is not None:
            throughputs.append(value)
        decision = adaptive.decide(throughputs)
        return {"repeats_stop": dump(decision)}

    for job in jobs:
        if runner.done_before(job):
            value = _ok_throughput(load_record(job.paths.record))
            if value is not None:
                throughputs.append(value)
            decision = adaptive.decide(throughputs)
            skipped += 1
            runner.on_skip(job)
        else:
            ran += runner.execute([job], decide=decide)
        if decision is not None and decision.stop:
            break
    return ran, skipped
