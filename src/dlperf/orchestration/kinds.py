"""The kind of a run, one class each (optimum-benchmark's scenarios): dlperf's timed loop (`native`), a rank task
of its own (`task`: commbench) and another framework's script (`external`: `--command`). Each owns what differs:
its checks before launch, the engines it loads, what its jobs carry to the agents, its outcome and its record;
`kind_of` decides a spec's kind once, its jobs carry it to the ranks and the record (`kind`). The fourth, a log
read by `dlperf extract`, is written by `framework_logs/extract.py`."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, ClassVar

from dlperf.errors import ConfigError, DataError
from dlperf.external.identity import framework_label
from dlperf.external.template import case_values
from dlperf.launch.base import RunJob
from dlperf.launch.messages import CommandLaunch, Failure, RunResult
from dlperf.orchestration.record import common_fields, external_record, measured_record, strict_json, task_record
from dlperf.records.paths import RunPaths
from dlperf.records.schema import Kind, Record
from dlperf.records.written import typed
from dlperf.secrets import mask
from dlperf.spec import RunSpec, flag
from dlperf.workloads import Workload, WorkloadPlan, check_engine, get_workload


class RunKind:
    """A native run, the workload's step timed by the harness on the spec's engine; the other kinds change what
    differs."""

    name: ClassVar[Kind] = "native"
    knows_its_work: ClassVar[bool] = True  # dlperf runs the workload itself: its estimates of time and memory apply
    shows_windows: ClassVar[bool] = True  # the log holds dlperf's window lines (the console follows them)

    def check(self, spec: RunSpec, plan: WorkloadPlan) -> None:
        """The kind's checks beyond the spec's own, before any process starts: the engine runs the workload."""
        check_engine(spec)

    def engines(self, spec: RunSpec) -> list[str]:
        """The engines the run loads: their checks and versions are the parent's to take."""
        return [spec.engine]

    def job(self, spec: RunSpec, plan: WorkloadPlan, repeat: int, paths: RunPaths) -> RunJob:
        return RunJob(spec, plan, repeat, paths, self.name)

    def framework(self, spec: RunSpec, env: dict[str, Any], result: RunResult) -> str:
        """`name version` of what ran it."""
        return framework_label(spec.engine, env.get(spec.engine))

    def fields(self, job: RunJob, result: RunResult) -> dict[str, Any]:
        """The kind's own fields in every record of it, failed or not: the batch the run trained on."""
        plan = job.plan
        return {
            "batch_size": plan.batch_per_device,  # the published name: samples per device per iteration
            "batch_size_per_device": plan.batch_per_device,
            "micro_batch_size": plan.micro_batch,
            "global_batch_size": plan.global_batch,
            "precision": job.spec.precision,
        }

    def outcome(self, job: RunJob, result: RunResult) -> tuple[Failure | None, Any]:
        """The run's failure, else what its record is made from (here rank 0's measurement)."""
        if result.failure:
            return result.failure, None
        if result.measured is None:
            return Failure("no node reported rank 0's measurement"), None
        return None, result.measured

    def failed(self, job: RunJob, record: dict[str, Any], failure: Failure) -> dict[str, Any]:
        """A failed run: the dead worker's facts."""
        return {**record, "failure": failure.facts()}

    def record(self, job: RunJob, result: RunResult, record: dict[str, Any], made_from: Any) -> dict[str, Any]:
        return measured_record(job, result, record)


class TaskKind(RunKind):
    """A workload's rank task instead of the timed loop (commbench): its record is the workload's own."""

    name: ClassVar[Kind] = "task"

    @staticmethod
    def owns(workload: Workload) -> bool:
        """A workload whose rank task runs instead of the timed loop (its `tasks`): the one test of them."""
        return bool(workload.tasks)

    def fields(self, job: RunJob, result: RunResult) -> dict[str, Any]:
        return {}  # no training batch

    def record(self, job: RunJob, result: RunResult, record: dict[str, Any], made_from: Any) -> dict[str, Any]:
        return task_record(job, result, record)


def _external() -> ModuleType:
    """The external run's side (every peer log format's patterns, 0.1 s of a CPU): imported for a `--command`
    only, not by every `dlperf run` before its agent starts (issue 55)."""
    from dlperf.orchestration import external_run

    return external_run


class ExternalKind(RunKind):
    """Another framework's own script (`--command`): dlperf starts its processes and reads its log."""

    name: ClassVar[Kind] = "external"
    knows_its_work = False  # the model is only the case's label
    shows_windows = False

    def check(self, spec: RunSpec, plan: WorkloadPlan) -> None:
        _external().check_command(spec, plan)

    def engines(self, spec: RunSpec) -> list[str]:
        return []  # dlperf cannot know what the script loads

    def job(self, spec: RunSpec, plan: WorkloadPlan, repeat: int, paths: RunPaths) -> RunJob:
        """The job with its command, every value its template may name, run where dlperf was started."""
        values = case_values(spec.to_dict(), plan.batch_per_device, plan.global_batch, repeat)
        command = CommandLaunch(
            spec.command or "",
            spec.command_per,
            spec.shell,
            values,
            os.getcwd(),
            launch_env=spec.launch_env,
            framework=spec.framework,
            stop_after_lines=spec.stop_after_lines,
            stop_after_seconds=spec.stop_after_seconds,
            line_patterns=list(_external().line_patterns(spec)),
            instrument=spec.instrument == "auto",
        )
        return RunJob(spec, plan, repeat, paths, self.name, command)

    def framework(self, spec: RunSpec, env: dict[str, Any], result: RunResult) -> str:
        return _external().framework_of(spec, result.node_facts)

    def fields(self, job: RunJob, result: RunResult) -> dict[str, Any]:
        return {
            **super().fields(job, result),
            "command": mask(job.spec.command or ""),
            "label": job.spec.engine_tag,
            **_external().command_fields(job.spec, result.node_facts),
        }

    def outcome(self, job: RunJob, result: RunResult) -> tuple[Failure | None, Any]:
        """The figures read from its log, or why it gives none."""
        if result.failure:
            return result.failure, None
        try:
            return None, _external().read_figures(job, result.node_facts)
        except DataError as error:
            return Failure(f"its output gives no throughput: {error}"), None

    def failed(self, job: RunJob, record: dict[str, Any], failure: Failure) -> dict[str, Any]:
        """And its last log lines."""
        return {**super().failed(job, record, failure), "log_tail": [mask(line) for line in _external().log_tail(job)]}

    def record(self, job: RunJob, result: RunResult, record: dict[str, Any], made_from: Any) -> dict[str, Any]:
        return external_record(job, result, record, made_from)


NATIVE, TASK, EXTERNAL_KIND = RunKind(), TaskKind(), ExternalKind()
BY_NAME = {kind.name: kind for kind in (NATIVE, TASK, EXTERNAL_KIND)}


def kind_of(spec: RunSpec) -> RunKind:
    """The spec's kind: a `--command` runs another framework's script, a workload with its own rank task runs that,
    every other run dlperf's timed loop."""
    if spec.command is not None:
        return EXTERNAL_KIND
    return TASK if TASK.owns(get_workload(spec.model)) else NATIVE


def require_training(spec: RunSpec) -> None:
    """`dlperf run` and `sweep` time training steps; a workload with its own rank task has its own command."""
    if TASK.owns(get_workload(spec.model)):
        raise ConfigError(
            f"{flag('model')} {spec.model} is not a training workload: measure it with `dlperf {spec.model}`"
        )


def build_record(job: RunJob, result: RunResult, env: dict[str, Any], started_at: float, finished_at: float) -> Record:
    """The run's record as its declared kind (dlperf.records.schema), built by the kind its job was planned as: the
    fields every run shares, the kind's own, then a failed run's facts or the kind's figures."""
    kind = BY_NAME[job.kind]
    if result.node_envs:
        env = {**env, "nodes": result.node_envs}
    failure, made_from = kind.outcome(job, result)
    framework = kind.framework(job.spec, env, result)
    times = (started_at, finished_at)
    record = common_fields(job, result, env, times, failure, kind=kind.name, framework=framework)
    record.update(kind.fields(job, result))
    record = kind.failed(job, record, failure) if failure else kind.record(job, result, record, made_from)
    return typed(strict_json(record))
