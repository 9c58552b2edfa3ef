"""One node's processes of an external run (`--command`), for the agent (agent.py): another framework's own
script, started once per rank (or once per node) with the rendezvous environment, every line it prints captured,
the first failure stopping the rest.

Node 0's processes write their lines, unprefixed, into the run's log: what the peer reader reads, gathered the way
a framework's own launcher gathers its ranks' output, and the one copy of them on disk. This agent's stdout (the
node's console) shows them prefixed with the rank, at a bounded rate; another node's processes, whose lines no log
holds, show every line there (launch/command_output.py). Each process leads its own process group, so a script's
own workers go with it, and dies with the agent (PR_SET_PDEATHSIG); SIGTERM to the agent stops them all first.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import dataclasses
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf.engines.base import node_name
from dlperf.external.identity import command_line, framework_version
from dlperf.external.template import Process, node_processes, rendezvous_for
from dlperf.instrument import Placement, place
from dlperf.launch.command_output import ConsoleView, OutputWatch, ProcessOutput, RunLog, pump
from dlperf.launch.hosts import allocation_hosts
from dlperf.launch.messages import AgentSpec, CommandFacts, CommandLaunch, NodeResult, how_it_ended
from dlperf.machine.process_tree import TreeMemory
from dlperf.metrics.noise import machine_load, take_snapshot
from dlperf.records.codec import decode, dump
from dlperf.records.parts import Threads

POLL_S = 0.1
FIRST_LOOK_S, WATCH_S = 0.3, 2.0  # where the processes' output goes: looked at soon after the start, then this often
STOP_GRACE_S = 5.0  # below the local launcher's grace, so the agent always cleans up before it is killed
THREADS = "OMP_NUM_THREADS"
# A launcher's own failure report after the error it reports: torchrun's `failed (exitcode: 1) local_rank: 0`
# line, its traceback ending in ChildFailedError, and its `=====` summary of the ranks.
LAUNCHER_REPORT = re.compile(r"\bfailed \(exitcode: -?\d+\) local_rank:|errors\.ChildFailedError\b")
RULE_LINE = re.compile(r"^[\s=\-*#_~+]*$")  # blank, or a banner's rule of `=` / `-` / `*`
# The worker's own error line (`ValueError: ...`, `torch.OutOfMemoryError: ...`): above the launcher's report,
# torchrun logs its own warnings (`W1127 ... Sending process 123 closing signal SIGTERM`) after it. A launcher's tag
# may lead it: torchrun's `[rank1]: ` (`[default0]:` with --tee), srun's task number `3: `.
ERROR_LINE = re.compile(
    r"^\s*(?:\d{1,6}:\s+)?(?:\[(?:default|rank)\d+\]:\s?)*\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b:?"
)


@dataclass
class StopRule:
    """`--stop-after-lines` / `--stop-after-seconds`: when dlperf ends the command itself, and why it did."""

    lines: int | None = None
    seconds: float | None = None
    patterns: list[re.Pattern[str]] = field(default_factory=list)
    seen: int = 0
    reached: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None

    def count(self, line: str) -> None:
        """One line of the counted process: a throughput line when a reader's signature matches it."""
        if self.lines is None or self.reached.is_set():
            return
        if any(p.search(line) for p in self.patterns):
            self.seen += 1
            if self.seen >= self.lines:
                self.reason = f"stopped by dlperf after {self.seen} throughput lines (--stop-after-lines {self.lines})"
                self.reached.set()

    def due(self, started: float) -> bool:
        if self.reached.is_set():
            return True
        if self.seconds is not None and time.monotonic() - started >= self.seconds:
            self.reason = f"stopped by dlperf after {self.seconds:g} s (--stop-after-seconds)"
            self.reached.set()
        return self.reached.is_set()


class Stopped(Exception):
    """SIGTERM reached the agent: the ssh lifeline closed, the parent's timeout, or Slurm ending the step."""


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signal.Signals(signum).name)


def _die_with_agent() -> None:
    """In the child before exec: SIGKILL it when the agent dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Running:
    process: Process
    proc: subprocess.Popen
    output: ProcessOutput
    watch: OutputWatch
    pump: threading.Thread

    @property
    def label(self) -> str:
        return label_of(self.process)

    @property
    def tail(self) -> collections.deque[str]:
        return self.output.tail


def label_of(process: Process) -> str:
    return f"rank {process.rank}" if process.rank is not None else f"node {process.node_rank}"


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, as a container or `taskset` sets it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def thread_env(threads: Threads) -> dict[str, str]:
    """What dlperf adds to each process's environment: only a value dlperf decided."""
    return {THREADS: threads.value} if threads.set_by == DLPERF_SETS and threads.value is not None else {}


DLPERF_SETS = "dlperf: the run's CPU share per process (--cpu-threads; auto: usable cores / processes)"


def thread_setting(processes: list[Process], cores: int, share: int | None = None) -> Threads:
    """OMP_NUM_THREADS for each process, as torchrun decides it for its workers: left as set (in dlperf's
    environment or by the command's own `env VAR=...`), else the run's CPU share (`share`: the spec's
    `cpu_threads`, the same in every topology of a sweep), else the node's usable cores shared by its processes.
    One process per node (`--command-per node`) starts its own workers, whose launcher decides: dlperf sets
    nothing."""
    line = command_line(processes[0].argv)
    given = line.environment({**os.environ, **processes[0].env}).get(THREADS)
    if given is None and (line.cleared or THREADS in line.unset):  # the command removes what anybody sets
        return Threads(None, "the command (`env -u` / `env -i`): unset", cores, len(processes))
    if given is not None:
        return Threads(given, "the environment", cores, len(processes))
    if processes[0].rank is None:
        return Threads(None, "the command's own launcher (--command-per node)", cores, len(processes))
    value = share if share is not None else max(1, cores // len(processes))
    return Threads(str(value), DLPERF_SETS, cores, len(processes))


def _start(
    process: Process,
    workdir: str,
    log: RunLog | None,
    lock: threading.Lock,
    rule: StopRule,
    counted: bool,
    threads: Threads,
    steps: str | None,
) -> Running:
    env = {"PYTHONUNBUFFERED": "1", **os.environ, **thread_env(threads), **process.env}
    placed = place(process.argv, env, steps, workdir) if steps else Placement(process.argv, env)
    proc = subprocess.Popen(
        placed.argv,
        cwd=workdir,
        env=placed.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,
        preexec_fn=_die_with_agent,
    )
    assert proc.stdout is not None
    view = ConsoleView(f"[{label_of(process)}] ".encode(), full=log is None, log_name=log.name if log else "")
    output = ProcessOutput(view, log, lock, rule, counted, sys.stdout.buffer)
    pipe, proc.stdout = proc.stdout, None  # the pump reads and closes it
    watch = OutputWatch(proc.pid, f"pipe:[{os.fstat(pipe.fileno()).st_ino}]", own_files(log, steps))
    thread = threading.Thread(target=pump, args=(pipe, output, watch), daemon=True)
    thread.start()
    return Running(process, proc, output, watch, thread)


def own_files(log: RunLog | None, steps: str | None) -> tuple[str, ...]:
    """The path prefixes of dlperf's own files a command's process holds (the hook's side files), or the run's."""
    return tuple(p for p in (log.name.removesuffix(".log") if log else None, steps) if p)


def last_words(lines: list[str]) -> str:
    """The line that says why a process failed: its last line that is no banner, and above a launcher's own
    failure report (torchrun's traceback and `=====` block name no cause) where one follows the error."""
    at = error_at(lines)
    if at is not None:
        return lines[at].strip()
    cut = _report_start(lines)
    return next((said for part in (lines[:cut], lines) if (said := _last_said(part))), "")


def error_at(lines: list[str]) -> int | None:
    """Where the worker's own error line is: the last one above a launcher's failure report; None where no report
    follows an error line."""
    cut = _report_start(lines)
    if cut == len(lines):
        return None
    return next((i for i in range(cut - 1, -1, -1) if ERROR_LINE.match(lines[i])), None)


def _report_start(lines: list[str]) -> int:
    """Where a launcher's own failure report starts (at its traceback where it has one); len(lines) without one."""
    cut = next((i for i, line in enumerate(lines) if LAUNCHER_REPORT.search(line)), len(lines))
    if cut < len(lines) and "ChildFailedError" in lines[cut]:  # the report's traceback starts above this line
        cut = next((i for i in range(cut, -1, -1) if lines[i].startswith("Traceback (most recent call last)")), cut)
    return cut


def _last_said(lines: list[str]) -> str:
    """The last line that is no banner (`=====`), stripped; "" without one."""
    return next((line.strip() for line in reversed(lines) if not RULE_LINE.match(line)), "")


def _failure(running: Running, code: int, host: str) -> NodeResult:
    """The first process that failed: its rank, exit code or signal, and the line that says why."""
    running.pump.join(timeout=2.0)
    last = last_words(list(running.tail))
    what, signal_name = how_it_ended(code)
    error = f"command {running.label} on {host} {what}" + (f": {last}" if last else "")
    return NodeResult.failed(error, rank=running.process.rank, host=host, exitcode=code, signal=signal_name)


def _wait(running: list[Running], host: str, rule: StopRule) -> NodeResult:
    """Until every process ends, one fails, or the stop rule is due (then the caller ends them: not a failure)."""
    started = time.monotonic()
    looked = started - WATCH_S + FIRST_LOOK_S
    while True:
        for r in running:
            code = r.proc.poll()
            if code not in (None, 0):
                return _failure(r, code, host)
        if all(r.proc.returncode == 0 for r in running):
            return NodeResult(host=host)
        if rule.due(started):
            return NodeResult(host=host)
        if time.monotonic() - looked >= WATCH_S:
            looked = time.monotonic()
            for r in running:
                r.watch.look()
        time.sleep(POLL_S)


def _stop_all(running: list[Running]) -> None:
    """SIGTERM every process group still there, then SIGKILL what is left after a grace period."""
    for r in running:
        if r.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(r.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for r in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(r.proc.pid, signal.SIGKILL)  # the group may outlive its leader (a script's own workers)
        r.proc.wait()
        r.pump.join(timeout=STOP_GRACE_S)


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """`host:port` or `[v6 address]:port` -> (host, port)."""
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


def allocation_nodes(nnodes: int) -> tuple[str, ...]:
    """The Slurm allocation's first `nnodes` host names, else () for the master address."""
    in_slurm = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    return tuple((allocation_hosts() or [])[:nnodes]) if in_slurm and nnodes >= 2 else ()


def stop_rule(command: CommandLaunch, node_rank: int) -> StopRule:
    """Lines are counted on node 0 (where the log is); every node keeps the time limit."""
    lines = command.stop_after_lines if node_rank == 0 else None
    return StopRule(lines, command.stop_after_seconds, [re.compile(p) for p in command.line_patterns])


def steps_prefix(spec: AgentSpec) -> str | None:
    """Where the instrumentation hook writes (`<run>.steps.<host>.<pid>` per process, beside the run's log), None
    where it is off."""
    assert spec.command is not None
    return str(Path(spec.log_path).with_suffix(".steps")) if spec.command.instrument else None


def command_facts(command: CommandLaunch, running: list[Running], rule: StopRule, memory: TreeMemory,
                  load: dict[str, Any] | None, threads: Threads, steps: str | None) -> dict[str, Any]:  # fmt: skip
    """What the record says of the command beside its log's figures: framework version, why it ended, memory,
    its processes' threads, whether its steps were timed, where output went that its pipe did not carry, and the
    machine's other load meanwhile."""
    processes = [r.process for r in running]
    elsewhere = [said for r in running if (said := r.watch.said(r.label))]
    facts: dict[str, Any] = {"ended_by": rule.reason, **memory.as_record(), "machine_load": load,
                             "threads": dump(threads),
                             "output_note": "; ".join(elsewhere) or None}  # fmt: skip
    if steps and processes:
        env = {**os.environ, **processes[0].env}
        facts["instrument"] = {
            "steps": steps,
            "not_placed": place(processes[0].argv, env, steps, command.workdir).reason,
        }
    if command.framework and processes:
        env = {**os.environ, **processes[0].env}
        facts["framework_version"] = framework_version(command.framework, processes[0].argv, command.workdir, env)
    return facts


def launch(spec: AgentSpec) -> NodeResult:
    """Start this node's command processes and wait for them; never raises for a process's failure."""
    command, settings = spec.command, spec.launch
    assert command is not None  # the agent sends only external runs here
    os.environ.update(settings.env)  # the processes inherit it: node name, socket interface
    host = node_name()
    node_rank = settings.node_rank if settings.node_rank is not None else int(os.environ.get("SLURM_PROCID", "0"))
    addr, port = split_endpoint(settings.rdzv_endpoint)
    addrs = tuple(command.node_addrs) or allocation_nodes(settings.nnodes)
    rdzv = rendezvous_for(settings.nnodes, settings.nproc_per_node, addr, port, command.values, command.launch_env,
                          addrs)  # fmt: skip
    processes = node_processes(command.template, rdzv, node_rank, command.per, command.shell)
    rule = stop_rule(command, node_rank)
    share = spec.run.get("cpu_threads")
    threads = thread_setting(processes, usable_cores(), share if isinstance(share, int) else None)
    steps = steps_prefix(spec)
    if steps and node_rank == 0:  # a run again in the same folder: its side files start empty
        for stale in Path(steps).parent.glob(f"{Path(steps).name}.rank*"):
            stale.unlink(missing_ok=True)
    with TreeMemory(os.getpid()) as memory:
        start = take_snapshot()
        running: list[Running] = []
        result = _launch(spec, command, processes, running, host, node_rank, rule, threads, steps)
        load = machine_load(start, take_snapshot()).as_record()
    facts = command_facts(command, running, rule, memory, load, threads, steps)
    return dataclasses.replace(result, command_facts=decode(CommandFacts, facts, strict=False))


def _launch(
    spec: AgentSpec,
    command: CommandLaunch,
    processes: list[Process],
    running: list[Running],
    host: str,
    node_rank: int,
    rule: StopRule,
    threads: Threads,
    steps: str | None,
) -> NodeResult:
    """Start the processes into `running` (the caller reads what their outputs saw) and wait for them."""
    if not os.path.isdir(command.workdir):
        return NodeResult.failed(
            f"folder {command.workdir} does not exist on {host}: start dlperf in a folder every node shares", host=host
        )
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    lock = threading.Lock()
    log = None
    if node_rank == 0:  # closed in finally
        arrivals = Path(spec.log_path).with_suffix(".arrivals")
        log = RunLog(open(spec.log_path, "ab"), open(arrivals, "ab"))  # noqa: SIM115
    try:
        for process in processes:
            try:
                counted = not running  # the first process: rank 0's lines on node 0
                running.append(_start(process, command.workdir, log, lock, rule, counted, threads, steps))
            except OSError as error:
                return NodeResult.failed(
                    f"cannot start `{shlex.join(process.argv)}` on {host}: {error.strerror or error}",
                    rank=process.rank,
                    host=host,
                )
        return _wait(running, host, rule)
    except Stopped as stop:
        return NodeResult.failed(f"{host} stopped by {stop}", host=host, stopped=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
        _stop_all(running)
        if log is not None:
            log.close()
        signal.signal(signal.SIGTERM, previous)
