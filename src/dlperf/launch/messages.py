"""The typed messages between the parent and the node agents, in JSON by the one codec of records and messages
(`records/codec.py`), shared by every launcher.

AgentSpec goes to every node agent (a file, stdin over ssh, or a shared folder under Slurm); NodeResult comes
back from each, with an external command's CommandFacts; RunResult is what the launcher makes of all of them for
the record.
"""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import asdict, dataclass, field
from typing import Any

from dlperf.harness.results import RunMeasurement
from dlperf.records.codec import decode_json, dump_json
from dlperf.records.parts import Kind, MachineLoad, Threads


@dataclass(frozen=True)
class NodeLaunch:
    """How one node's agent starts its workers; each launcher fills in the endpoint and the node's own values."""

    nnodes: int
    nproc_per_node: int
    run_id: str
    env: dict[str, str] = field(default_factory=dict)
    rdzv_endpoint: str = ""
    is_host: bool | None = True  # None: c10d decides by matching the endpoint to this machine
    local_addr: str | None = None
    log_dir: str | None = None
    collect_env: bool = False
    rdzv_timeout: int = 300
    node_rank: int | None = None  # an external command's node rank where the launcher fixes it (else SLURM_PROCID)

    @property
    def one_process(self) -> bool:
        """One rank on one node: nobody to meet, so the agent runs it itself (launch/one_process.py)."""
        return self.nnodes == 1 and self.nproc_per_node == 1


@dataclass(frozen=True)
class CommandLaunch:
    """An external run's command (`--command`): the template, per rank or per node, and the values it names."""

    template: str
    per: str
    shell: bool
    values: dict[str, Any]  # external.template.case_values: batch size, precision, repeat, the case's keys
    workdir: str  # where the command runs: the folder dlperf was started in
    launch_env: str = "torch"  # whose launcher's variables each process gets (external.template.framework_env)
    node_addrs: list[str] = field(default_factory=list)  # every node's address where the launcher knows them
    framework: str | None = None  # asked of the command's interpreter for its version (external.identity)
    stop_after_lines: int | None = None  # end the command after this many lines matching `line_patterns`
    stop_after_seconds: float | None = None
    line_patterns: list[str] = field(default_factory=list)  # the log reader's throughput-line signatures
    instrument: bool = True  # dlperf's start-up hook on a Python command's PYTHONPATH (dlperf.instrument)


@dataclass(frozen=True)
class AgentSpec:
    """Everything a node agent needs: the run (RunSpec.to_dict()), rank 0's log path, its launch and the run's
    kind (a rank task or the timed loop, for the ranks); an external run's command instead of dlperf's workers."""

    run: dict[str, Any]
    log_path: str
    launch: NodeLaunch
    kind: Kind
    command: CommandLaunch | None = None

    def __post_init__(self) -> None:
        """An external run, and only one, carries its command: the two say one thing and must agree."""
        if (self.kind == "external") != (self.command is not None):
            has = "no command" if self.command is None else "a command"
            raise ValueError(f"an agent spec of kind {self.kind!r} with {has}: the parent and the agent disagree")

    def with_launch(self, **changes: Any) -> AgentSpec:
        return dataclasses.replace(self, launch=dataclasses.replace(self.launch, **changes))

    def to_json(self) -> str:
        return dump_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> AgentSpec:
        return decode_json(cls, text)


def how_it_ended(code: int) -> tuple[str, str | None]:
    """A dead process's end as the failure says it, `was killed by SIGKILL` or `exited with code 1`, and the
    signal's name (None for an exit code)."""
    if code < 0:
        name = signal.Signals(-code).name
        return f"was killed by {name}", name
    return f"exited with code {code}", None


@dataclass(frozen=True)
class Failure:
    """Why a run produced no measurement, with the facts that locate it."""

    error: str
    rank: int | None = None
    host: str | None = None
    exitcode: int | None = None
    signal: str | None = None
    stopped: bool = False  # stopped by dlperf after another node failed: an echo, not the cause

    def facts(self) -> dict[str, Any]:
        """Where it failed, for the record's `failure` field."""
        return {k: v for k, v in asdict(self).items() if k not in ("error", "stopped") and v is not None}


@dataclass(frozen=True)
class Instrumented:
    """Where a node's command processes' start-up hook writes its steps, and why it could not be placed."""

    steps: str
    not_placed: str | None = None


@dataclass(frozen=True)
class CommandFacts:
    """What one node's agent saw of its external command, beside the command's log: why it ended, the sampled
    memory of its process tree, the machine's other load meanwhile, its processes' threads, the start-up hook, and
    the framework version its interpreter reports (`launch/external_node.command_facts`)."""

    ended_by: str | None = None
    host_memory_mib_sampled: float | None = None
    gpu_memory_mib_sampled: float | None = None
    memory_note: str | None = None
    machine_load: MachineLoad | None = None
    threads: Threads | None = None
    instrument: Instrumented | None = None
    framework_version: str | None = None
    output_note: str | None = None  # where a process's output went after it closed its stdout and stderr


@dataclass(frozen=True)
class NodeResult:
    """One node's outcome: rank 0's measurement when it held rank 0, or the failure; its environment."""

    host: str | None = None
    measured: RunMeasurement | None = None
    failure: Failure | None = None
    env: dict[str, Any] | None = None  # `dlperf env --json` of the node, as it gathers it
    command_facts: CommandFacts | None = None  # an external command's, as the node saw it

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def failed(cls, error: str, **facts: Any) -> NodeResult:
        return cls(host=facts.get("host"), failure=Failure(error=error, **facts))

    def to_json(self) -> str:
        return dump_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> NodeResult:
        return decode_json(cls, text)


@dataclass(frozen=True)
class RunResult:
    """The run as the record sees it: the measurement or the failure, and every node's environment.

    Neither measurement nor failure: every node finished and the measurement is in the run's log (an external
    command's), or no rank reported one (the record says so)."""

    measured: RunMeasurement | None = None
    failure: Failure | None = None
    node_envs: list[dict[str, Any]] = field(default_factory=list)
    node_facts: list[CommandFacts] = field(default_factory=list)  # each node's facts of its external command

    @classmethod
    def failed(cls, error: str, **facts: Any) -> RunResult:
        return cls(failure=Failure(error=error, **facts))


def merge_results(results: list[NodeResult], ended_at: list[float]) -> RunResult:
    """One run result from every node's: rank 0's measurement, or the failure that caused the others.

    A node stopped by dlperf after another failed is an echo, as is a worker that lost its peer; a worker
    killed by a signal is the cause, else the node that failed first.
    """
    envs = [r.env for r in results if r.env]
    facts = [r.command_facts for r in results if r.command_facts]
    if all(r.ok for r in results):
        measured = next((r.measured for r in results if r.measured), None)
        return RunResult(measured=measured, node_envs=envs, node_facts=facts)
    failed = [(t, r.failure) for t, r in zip(ended_at, results) if r.failure]
    own = [(t, f) for t, f in failed if not f.stopped] or failed
    own.sort(key=lambda pair: (pair[1].signal is None, pair[0]))
    return RunResult(failure=own[0][1], node_envs=envs, node_facts=facts)
