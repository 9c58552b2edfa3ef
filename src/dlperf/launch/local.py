"""Run one node's agent as a child process: its own process group, a time limit, nothing left behind."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

from dlperf.engines.base import node_name
from dlperf.errors import ConfigError
from dlperf.launch.base import Launcher, RunJob
from dlperf.launch.messages import AgentSpec, NodeResult, RunResult, how_it_ended
from dlperf.spec import RunSpec

KILL_GRACE_S = 10.0


def free_port(host: str = "127.0.0.1", count: int = 1) -> int:
    """A TCP port nobody listens on now, with the `count - 1` ports above it free too: the c10d rendezvous store
    takes the port, a JAX run's jax.distributed coordinator the next one (engines/jax/engine.py). A port the
    kernel hands out is often next to one in use by another connection: a taken coordinator port made
    jax.distributed crash the rank with SIGSEGV (seen under the test suite's parallel runs)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        if port + count <= 65536 and all(_bindable(host, port + k) for k in range(1, count)):
            return port
    raise OSError(f"no {count} consecutive free TCP ports found on {host}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def stop_process_group(proc: subprocess.Popen) -> None:
    """SIGTERM the whole group (agent and workers), then SIGKILL whatever is left after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def timed_out(timeout: float, running: list[int] | None = None, starting: list[int] | None = None) -> RunResult:
    """The failure of a run past --timeout, naming the ranks still at work and those that had not begun (their
    framework's start-up took the time: on a loaded machine that alone can exceed a short --timeout)."""
    states = [
        f"{_ranks(running)} still running" if running else "",
        f"{_ranks(starting)} not yet started" if starting else "",
    ]
    said = " and ".join(state for state in states if state)
    return RunResult.failed(
        f"timed out after {timeout:g} s{' with ' + said if said else ''}: raise --timeout or lower --iters"
    )


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def rank_states(log_dir: Path, ranks: int | None) -> tuple[list[int], list[int]]:
    """The ranks still running and, of the node's `ranks` dlperf starts itself (None: a command's own processes,
    which keep no markers), those not yet started, from the markers each rank keeps in the run's elastic log folder
    (see one_process.marked); it reads the files rather than importing the agent's side."""

    def marked(state: str) -> list[int]:
        return sorted(int(p.name.split("-")[1].split(".")[0]) for p in log_dir.glob(f"rank-*.{state}"))

    started = set(marked("started"))
    return marked("running"), [r for r in range(ranks or 0) if r not in started]


def agent_argv(python: str, spec_arg: str, result_path: str) -> list[str]:
    return [python, "-m", "dlperf.launch.agent", spec_arg, result_path]


def run_agent(spec: AgentSpec, run_dir: Path, result_path: Path, console_path: Path, timeout: float) -> RunResult:
    """Start `python -m dlperf.launch.agent -` and wait; a timeout or a dead agent becomes a failed result.

    The spec goes on the agent's stdin, which stays open as its lifeline: if this process dies, even by
    SIGKILL, the pipe closes, the agent stops its workers and removes `run_dir` (no orphan keeps measuring)."""
    result_path.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "DLPERF_PARENT_PID": str(os.getpid()),
        "DLPERF_RUN_DIR": str(run_dir),
    }
    with open(console_path, "ab") as console:
        proc = subprocess.Popen(
            agent_argv(sys.executable, "-", str(result_path)),
            stdin=subprocess.PIPE,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        try:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(spec.to_json().encode() + b"\n")
                proc.stdin.flush()
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            native = spec.launch.nproc_per_node if spec.kind != "external" else None
            states = rank_states(Path(spec.launch.log_dir), native)
            stop_process_group(proc)
            return timed_out(timeout, *states)
        except BaseException:
            stop_process_group(proc)
            raise
        finally:
            stop_process_group(proc)
            with contextlib.suppress(OSError):
                proc.stdin.close()
    if result_path.exists():
        node = NodeResult.from_json(result_path.read_text(encoding="utf-8"))
        return RunResult(
            measured=node.measured, failure=node.failure, node_facts=[node.command_facts] if node.command_facts else []
        )
    return _without_result(spec, proc.returncode, console_path)


def _without_result(spec: AgentSpec, code: int, console_path: Path) -> RunResult:
    """The agent ended before writing its result: killed while it ran a lone rank itself, the rank's death, named
    as torchrun's launcher names a dead worker's; else the launcher's."""
    if code < 0 and spec.launch.one_process and spec.kind != "external":
        ended, name = how_it_ended(code)
        host = node_name()
        return RunResult.failed(f"worker rank 0 on {host} {ended}", rank=0, host=host, signal=name)
    reason = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
    return RunResult.failed(f"launcher {reason} before writing a result; see {console_path}")


class LocalLauncher(Launcher):
    """One agent on this machine, its rendezvous on loopback."""

    local = True

    def check(self, spec: RunSpec) -> None:
        if spec.nodes > 1:
            raise ConfigError(
                f"--nodes {spec.nodes} needs other machines: give --hosts/--hostfile, or --launcher slurm"
            )

    def _spec(self, job: RunJob, workdir: Path) -> AgentSpec:
        port = self.options.master_port or free_port(count=2)  # and port + 1: JAX's coordinator
        return job.agent_spec(self.options).with_launch(
            rdzv_endpoint=f"127.0.0.1:{port}", log_dir=str(workdir / "elastic")
        )

    def describe(self, job: RunJob) -> list[str]:
        workdir = Path("$TMPDIR/dlperf-XXXX")
        return [
            "# spec on stdin:",
            self._spec(job, workdir).to_json(),
            shlex.join(agent_argv(sys.executable, "-", f"{workdir}/result.json")),
        ]

    def run(self, job: RunJob, workdir: Path) -> RunResult:
        return run_agent(
            self._spec(job, workdir),
            workdir,
            workdir / "result.json",
            job.paths.console,
            job.spec.timeout,
        )
