"""Sweeps: a YAML matrix of cases, each repeated, run one after another with resume.

The YAML holds run keys (the shared ones and the model's own). A key whose value is a list is a matrix axis;
`topology` takes names like `1n8g` (or a list of them); `repeats` sets the repeat count. `matrix:` may list
sub-matrices, each merged over the top-level keys and expanded on its own (e.g. fp32 at batch 128 and 160, AMP
at 256).
Examples: configs/quick.yaml, configs/resnet50_report.yaml.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlperf.errors import ConfigError, ResultsError
from dlperf.launch import Launcher, RunJob
from dlperf.orchestration.run import OnRecord, check_run, execute, plan_jobs
from dlperf.records.paths import run_paths
from dlperf.records.schema import read_record
from dlperf.spec import RunSpec, parse_topology
from dlperf.workloads import WorkloadPlan, require_training, spec_from_mapping

DEFAULT_REPEATS = 5


@dataclass
class SweepPlan:
    cases: list[tuple[RunSpec, WorkloadPlan]]
    repeats: int

    def jobs(self, out: str | Path) -> list[RunJob]:
        repeats = list(range(1, self.repeats + 1))
        return [job for spec, plan in self.cases for job in plan_jobs(spec, plan, repeats, out)]


def load_sweep_file(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read sweep file {path}: {error.strerror or error}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise ConfigError(f"sweep file {path} does not parse{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"sweep file {path} must be a mapping of keys to values or lists")
    return data


def plan_sweep(spec: dict[str, Any], launcher: Launcher, repeats: int | None = None) -> SweepPlan:
    """Expand the matrix into validated cases; every case is checked before anything runs.

    With a host list and no topology or nodes in the file, every case spans all the hosts.
    """
    spec = dict(spec)
    if launcher.options.hosts and not {"topology", "nodes"} & set(spec):
        spec["nodes"] = len(launcher.options.hosts)
    spec_repeats = spec.pop("repeats", DEFAULT_REPEATS)
    repeats = repeats if repeats is not None else spec_repeats
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats <= 0:
        raise ConfigError(f"repeats must be a positive integer, got {repeats!r}")
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
    return SweepPlan(cases=cases, repeats=repeats)


def _expand(spec: dict[str, Any], launcher: Launcher) -> Iterator[tuple[RunSpec, WorkloadPlan]]:
    """One sub-matrix: the cartesian product of its list-valued keys, each case checked."""
    spec = dict(spec)
    topologies = spec.pop("topology", None)
    if topologies is not None:
        if {"nodes", "devices_per_node", "devices-per-node"} & set(spec):
            raise ConfigError("give either `topology` or `nodes`/`devices_per_node` in a sweep file, not both")
        topologies = topologies if isinstance(topologies, list) else [topologies]
        spec["_topology"] = [parse_topology(t) for t in topologies]
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
        yield run_spec, check_run(run_spec, launcher)


def record_is_complete(path: Path, retry_failed: bool) -> bool:
    record = read_record(path)
    return record is not None and (record["status"] == "ok" or not retry_failed)


@dataclass
class SweepOutcome:
    ran: list[dict[str, Any]]
    skipped: int

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.ran if r["status"] != "ok"]


def run_sweep(
    plan: SweepPlan,
    out: str | Path,
    env: dict[str, Any],
    launcher: Launcher,
    *,
    resume: bool,
    overwrite: bool,
    retry_failed: bool,
    on_skip: Callable[[RunJob], None],
    on_record: OnRecord,
) -> SweepOutcome:
    """Run every case and repeat; records land as they are produced, so an interrupted sweep resumes."""
    jobs = plan.jobs(out)
    existing = [job for job in jobs if job.paths.record.exists()]
    if existing and not (resume or overwrite):
        raise ResultsError(
            f"{out} already holds {len(existing)} records of this sweep: pass --resume to finish it "
            f"or --overwrite to start again"
        )
    todo = []
    skipped = 0
    for job in jobs:
        if resume and record_is_complete(job.paths.record, retry_failed):
            skipped += 1
            on_skip(job)
        else:
            todo.append(job)
    ran = execute(todo, launcher, env, overwrite=True, on_record=on_record)
    return SweepOutcome(ran=ran, skipped=skipped)
