"""Sweeps: a YAML matrix of cases, each repeated, run one after another with resume.

The YAML holds RunConfig keys. A key whose value is a list is a matrix axis; `topology` takes names like
`1n8g` (or a list of them); `repeats` sets the repeat count. `matrix:` may list sub-matrices, each merged
over the top-level keys and expanded on its own (e.g. fp32 at batch 128 and 160, AMP at 256).
Examples: configs/quick.yaml, configs/resnet50_report.yaml.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dlperf.config import RunConfig, config_from_mapping, parse_topology
from dlperf.errors import ConfigError, ResultsError
from dlperf.launch.options import LaunchOptions, in_slurm_allocation
from dlperf.launch.runner import LOCAL, check_config, execute_run
from dlperf.launch.slurm import submit_runs
from dlperf.reporting.layout import run_paths
from dlperf.reporting.record import read_record

DEFAULT_REPEATS = 5


@dataclass
class SweepPlan:
    cases: list[RunConfig]
    repeats: int

    def runs(self) -> Iterator[tuple[RunConfig, int]]:
        for config in self.cases:
            for repeat in range(1, self.repeats + 1):
                yield config, repeat


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


def plan_sweep(spec: dict[str, Any], repeats: int | None = None, launch: LaunchOptions = LOCAL) -> SweepPlan:
    """Expand the matrix into validated cases; every case is checked before anything runs.

    With a host list and no topology or nodes in the file, every case spans all the hosts.
    """
    spec = dict(spec)
    if launch.hosts and not {"topology", "nodes"} & set(spec):
        spec["nodes"] = len(launch.hosts)
    spec_repeats = spec.pop("repeats", DEFAULT_REPEATS)
    repeats = repeats if repeats is not None else spec_repeats
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats <= 0:
        raise ConfigError(f"repeats must be a positive integer, got {repeats!r}")
    variants = spec.pop("matrix", [{}])
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants) or not variants:
        raise ConfigError("`matrix` must be a list of mappings, each a sub-matrix of keys and values")
    cases: list[RunConfig] = []
    seen: set[Path] = set()
    for variant in variants:
        for config in _expand({**spec, **variant}, launch):
            key = run_paths("", config, 1).record
            if key in seen:
                raise ConfigError(f"two sweep cases write the same files ({key}): make the matrix values distinct")
            seen.add(key)
            cases.append(config)
    return SweepPlan(cases=cases, repeats=repeats)


def _expand(spec: dict[str, Any], launch: LaunchOptions) -> Iterator[RunConfig]:
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
        config = config_from_mapping(values)
        check_config(config, launch)
        yield config


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
    *,
    resume: bool,
    overwrite: bool,
    retry_failed: bool,
    on_progress: Callable[[RunConfig, int, dict[str, Any] | None], None],
    launch: LaunchOptions = LOCAL,
) -> SweepOutcome:
    """Run every case and repeat; records land as they are produced, so an interrupted sweep resumes.

    Outside a Slurm allocation, `--launcher slurm` submits the runs as sbatch jobs and collects their records.
    """
    runs = list(plan.runs())
    existing = [p for c, r in runs if (p := run_paths(out, c, r).record).exists()]
    if existing and not (resume or overwrite):
        raise ResultsError(
            f"{out} already holds {len(existing)} records of this sweep: pass --resume to finish it "
            f"or --overwrite to start again"
        )
    outcome = SweepOutcome(ran=[], skipped=0)
    todo = []
    for config, repeat in runs:
        if resume and record_is_complete(run_paths(out, config, repeat).record, retry_failed):
            outcome.skipped += 1
            on_progress(config, repeat, None)
        else:
            todo.append((config, repeat))
    if launch.kind == "slurm" and not in_slurm_allocation():
        for (config, repeat), record in zip(todo, submit_runs(todo, out, launch, overwrite=True)):
            outcome.ran.append(record)
            on_progress(config, repeat, record)
        return outcome
    for config, repeat in todo:
        record = execute_run(config, repeat, out, env, overwrite=True, launch=launch)
        outcome.ran.append(record)
        on_progress(config, repeat, record)
    return outcome
