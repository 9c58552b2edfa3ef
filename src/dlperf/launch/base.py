"""What every launcher does: place one planned run's node agents somewhere and hand back one RunResult."""

from __future__ import annotations

import shlex
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import ConfigError
from dlperf.external.template import node_processes, rendezvous_for
from dlperf.launch.messages import AgentSpec, CommandLaunch, NodeLaunch, RunResult
from dlperf.launch.options import LaunchOptions
from dlperf.records.parts import Kind
from dlperf.records.paths import RunPaths
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan


@dataclass(frozen=True)
class RunJob:
    """One planned run: the spec, its plan and its kind (each decided once), its repeat number and its files."""

    spec: RunSpec
    plan: WorkloadPlan
    repeat: int
    paths: RunPaths
    kind: Kind
    command: CommandLaunch | None = None  # another framework's script to run instead of dlperf's (its kind's)

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
            kind=self.kind,
            command=self.command,
        )


DRY_RUN_PORT = 29500  # the port --dry-run shows when none is given (a run picks a free one)

# Called once per finished run: its RunResult, or None where the run wrote its own record (an sbatch job).
OnDone = Callable[[RunJob, "RunResult | None"], None]


class Launcher(ABC):
    """Starts runs' node agents; `local` says the devices are on this machine (the parent may check them),
    `takes_hosts` that it starts them on the hosts of --hosts/--hostfile (and needs them)."""

    local = False
    takes_hosts = False
    log_note = ""  # what the console says after the log's path, where the log does not grow as the run goes

    def __init__(self, options: LaunchOptions) -> None:
        self.options = options
        if self.takes_hosts and not options.hosts:
            raise ConfigError(f"--launcher {options.kind} needs --hosts node1,node2 or --hostfile FILE")
        if options.hosts and not self.takes_hosts:
            raise ConfigError(f"--hosts/--hostfile go with the ssh launcher, not --launcher {options.kind}")

    def check(self, spec: RunSpec) -> None:  # noqa: B027 - most launchers can place any run
        """Refuse, before anything starts, a run this launcher cannot place."""

    @abstractmethod
    def describe(self, job: RunJob) -> list[str]:
        """The exact commands (and specs) the run would execute, for --dry-run."""

    @abstractmethod
    def run(self, job: RunJob, workdir: Path) -> RunResult:
        """Run it and wait; a failure is a RunResult too, never an exception."""

    def node_addrs(self, job: RunJob) -> list[str]:
        """Every node's address as an external command's peers see it (TF_CONFIG, Paddle's endpoints)."""
        return [self.options.master_addr or "127.0.0.1"] * job.spec.nodes

    def describe_processes(self, job: RunJob) -> list[str]:
        """A command's processes for --dry-run (none for dlperf's own run): each one's arguments and variables."""
        spec = job.spec
        if job.command is None:
            return []
        port = self.options.master_port or DRY_RUN_PORT
        addrs = self.node_addrs(job)
        rdzv = rendezvous_for(spec.nodes, spec.devices_per_node, addrs[0], port, job.command.values,
                              spec.launch_env, tuple(addrs))  # fmt: skip
        lines = (
            [] if self.options.master_port else [f"# (no --master-port: the port is chosen at run time; {port} here)"]
        )
        for node in range(spec.nodes):
            for process in node_processes(spec.command or "", rdzv, node, spec.command_per, spec.shell):
                who = f"rank {process.rank}" if process.rank is not None else "its one process"
                env = " ".join(f"{k}={shlex.quote(v)}" for k, v in process.env.items())
                lines.append(f"# node {node} ({addrs[node]}), {who}: {env} {shlex.join(process.argv)}")
        return lines

    def describe_all(self, jobs: list[RunJob]) -> str:
        return "\n".join(
            line
            for job in jobs
            for line in [f"# {job.spec.model} {job.spec.topology} repeat {job.repeat} -> {job.paths.record}"]
            + self.describe(job)
            + self.describe_processes(job)
        )

    def run_all(self, jobs: list[RunJob], on_done: OnDone) -> None:
        """One run after another, each in its own temporary folder."""
        for job in jobs:
            with tempfile.TemporaryDirectory(prefix="dlperf-") as tmp:
                result = self.run(job, Path(tmp))
            on_done(job, result)
