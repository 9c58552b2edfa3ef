"""One node's processes of an external run (`--command`), for the agent (agent.py): another framework's own
script, started once per rank (or once per node) with the rendezvous environment, every line it prints captured,
the first failure stopping the rest.

Node 0's processes write their lines, unprefixed, into the run's log: what the peer reader reads, gathered the way
a framework's own launcher gathers its ranks' output. Every process's lines also go to this agent's stdout (the
node's console), prefixed with the rank. Each process leads its own process group, so a script's own workers go
with it, and dies with the agent (PR_SET_PDEATHSIG); SIGTERM to the agent stops them all first.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO

from dlperf.command.template import Process, node_processes, rendezvous_for
from dlperf.engines.base import node_name
from dlperf.launch.messages import AgentSpec, NodeResult

POLL_S = 0.1
STOP_GRACE_S = 5.0  # below the local launcher's grace, so the agent always cleans up before it is killed
TAIL_LINES = 20


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
    tail: collections.deque[str]
    pump: threading.Thread

    @property
    def label(self) -> str:
        return f"rank {self.process.rank}" if self.process.rank is not None else f"node {self.process.node_rank}"


def _pump(stream: IO[bytes], prefix: bytes, log: IO[bytes] | None, lock: threading.Lock, tail: collections.deque):
    """Copy one process's lines to the log (node 0) and, prefixed, to the console; keep the last few."""
    for line in iter(stream.readline, b""):
        line = line if line.endswith(b"\n") else line + b"\n"
        with lock:
            if log is not None:
                log.write(line)
                log.flush()
            sys.stdout.buffer.write(prefix + line)
            sys.stdout.buffer.flush()
        tail.append(line.decode("utf-8", "replace").rstrip())
    stream.close()


def _start(process: Process, workdir: str, log: IO[bytes] | None, lock: threading.Lock) -> Running:
    proc = subprocess.Popen(
        process.argv,
        cwd=workdir,
        env={"PYTHONUNBUFFERED": "1", **os.environ, **process.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        process_group=0,
        preexec_fn=_die_with_agent,
    )
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    running = Running(process, proc, tail, threading.Thread(target=lambda: None))
    prefix = f"[{running.label}] ".encode()
    running.pump = threading.Thread(target=_pump, args=(proc.stdout, prefix, log, lock, tail), daemon=True)
    running.pump.start()
    return running


def _failure(running: Running, code: int, host: str) -> NodeResult:
    """The first process that failed: its rank, exit code or signal, and the last line it printed."""
    running.pump.join(timeout=2.0)
    last = next((line.strip() for line in reversed(running.tail) if line.strip()), "")
    signal_name = signal.Signals(-code).name if code < 0 else None
    what = f"was killed by {signal_name}" if signal_name else f"exited with code {code}"
    error = f"command {running.label} on {host} {what}" + (f": {last}" if last else "")
    return NodeResult.failed(error, rank=running.process.rank, host=host, exitcode=code, signal=signal_name)


def _wait(running: list[Running], host: str) -> NodeResult:
    while True:
        for r in running:
            code = r.proc.poll()
            if code not in (None, 0):
                return _failure(r, code, host)
        if all(r.proc.returncode == 0 for r in running):
            return NodeResult(host=host)
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


def launch(spec: AgentSpec) -> NodeResult:
    """Start this node's command processes and wait for them; never raises for a process's failure."""
    command, settings = spec.command, spec.launch
    assert command is not None  # the agent sends only external runs here
    os.environ.update(settings.env)  # the processes inherit it: node name, socket interface
    host = node_name()
    node_rank = settings.node_rank if settings.node_rank is not None else int(os.environ.get("SLURM_PROCID", "0"))
    addr, port = split_endpoint(settings.rdzv_endpoint)
    rdzv = rendezvous_for(settings.nnodes, settings.nproc_per_node, addr, port, command.values)
    processes = node_processes(command.template, rdzv, node_rank, command.per, command.shell)
    if not os.path.isdir(command.workdir):
        return NodeResult.failed(
            f"folder {command.workdir} does not exist on {host}: start dlperf in a folder every node shares", host=host
        )
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    lock = threading.Lock()
    running: list[Running] = []
    log = open(spec.log_path, "ab") if node_rank == 0 else None  # noqa: SIM115 - closed in finally
    try:
        for process in processes:
            try:
                running.append(_start(process, command.workdir, log, lock))
            except OSError as error:
                return NodeResult.failed(
                    f"cannot start `{shlex.join(process.argv)}` on {host}: {error.strerror or error}",
                    rank=process.rank,
                    host=host,
                )
        return _wait(running, host)
    except Stopped as stop:
        return NodeResult.failed(f"{host} stopped by {stop}", host=host, stopped=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
        _stop_all(running)
        if log is not None:
            log.close()
        signal.signal(signal.SIGTERM, previous)
