"""What every launcher does: place one planned run's node agents somewhere and hand back one RunResult."""

from __future__ import annotations

import os
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlperf.command.template import case_values
from dlperf.launch.messages import AgentSpec, CommandLaunch, NodeLaunch, RunResult
from dlperf.launch.options import LaunchOptions
from dlperf.records.paths import RunPaths
from dlperf.spec import EXTERNAL, RunSpec
from dlperf.workloads import WorkloadPlan


@dataclass(frozen=True)
class RunJob:
    """One planned run: the spec, its plan (made once), its repeat number and its files."""

    spec: RunSpec
    plan: WorkloadPlan
    repeat: int
    paths: RunPaths

    def agent_spec(self, options: LaunchOptions) -> AgentSpec:
        """What every node agent gets; each launcher adds the rendezvous endpoint and the node's own settings."""
        return AgentSpec(
            run=self.spec.to_dict(),
            log_path=str(self.paths.log.resolve()),
            launch=NodeLaunch(
                nnodes=self.spec.nodes,
                nproc_per_node=self.spec.devices_per_node,
                run_id=f"dlperf-{uuid.uuid4().hex[:12]}",
                env=options.worker_env(),
            ),
            command=self.command() if self.spec.engine == EXTERNAL else None,
        )

    def command(self) -> CommandLaunch:
        """An external run's command with every value its template may name, run where dlperf was started."""
        spec = self.spec
        values = case_values(spec.to_dict(), self.plan.batch_per_device, self.plan.global_batch, self.repeat)
        return CommandLaunch(spec.command or "", spec.command_per, spec.shell, values, os.getcwd())


# Called once per finished run: its RunResult, or None where the run wrote its own record (an sbatch job).
OnDone = Callable[[RunJob, "RunResult | None"], None]


class Launcher(ABC):
    """Starts runs' node agents; `local` says the devices are on this machine (the parent may check them)."""

    local = False

    def __init__(self, options: LaunchOptions) -> None:
        self.options = options

    def check(self, spec: RunSpec) -> None:  # noqa: B027 - most launchers can place any run
        """Refuse, before anything starts, a run this launcher cannot place."""

    @abstractmethod
    def describe(self, job: RunJob) -> list[str]:
        """The exact commands (and specs) the run would execute, for --dry-run."""

    @abstractmethod
    def run(self, job: RunJob, workdir: Path) -> RunResult:
        """Run it and wait; a failure is a RunResult too, never an exception."""

    def describe_all(self, jobs: list[RunJob]) -> str:
        return "\n".join(
            line
            for job in jobs
            for line in [f"# {job.spec.model} {job.spec.topology} repeat {job.repeat} -> {job.paths.record}"]
            + self.describe(job)
        )

    def run_all(self, jobs: list[RunJob], on_done: OnDone) -> None:
        """One run after another, each in its own temporary folder."""
        for job in jobs:
            with tempfile.TemporaryDirectory(prefix="dlperf-") as tmp:
                result = self.run(job, Path(tmp))
            on_done(job, result)
