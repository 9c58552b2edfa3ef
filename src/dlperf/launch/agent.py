"""One node's torchrun agent, run as `python -m dlperf.launch.agent SPEC RESULT`.

SPEC `-` reads the spec as one JSON line from stdin and then treats stdin as a lifeline: when it closes
(the ssh connection or the parent is gone) the agent stops its workers. `%t` in RESULT becomes Slurm's task
id, so one srun command gives each node its own result file.

The launching parent may name itself in DLPERF_PARENT_PID and the run's temporary folder in DLPERF_RUN_DIR:
an agent whose parent is already gone exits at once, and one that outlives its parent removes that folder. A
stopped agent (SIGTERM, or its lifeline closed) is gone within STOP_GRACE_S, whatever holds its exit.

It starts the node's workers through torchrun's launcher API (elastic_launch, c10d rendezvous), or runs a lone
rank itself (one process on one node: nothing to meet, its framework imported once, one_process.py), and
writes a JSON result: rank 0's measurement when this node holds rank 0, or the failure with the rank,
exit code and signal of the first worker that died. The parent process (local or over ssh) reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import os
import shutil
import signal
import sys
import threading
import time

from dlperf.engines import engine_versions
from dlperf.engines.base import node_name
from dlperf.launch.messages import AgentSpec
from dlperf.machine.environment import collect_environment
from dlperf.records.store import write_text_atomic

ORPHAN_WAIT_S = 2.0
STOP_GRACE_S = 15.0  # from the first SIGTERM to the agent's exit, whatever holds it (exit_after_grace)


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this agent when its parent dies, even by SIGKILL; the agent then stops its workers.

    A parent that died before the signal was armed is caught by `parent_gone`, checked right after."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def parent_gone(wait_s: float = 0.0) -> bool:
    """True when the parent named in DLPERF_PARENT_PID is no longer ours (we were re-parented), within `wait_s`:
    the kernel closes a dying parent's pipes, and signals from its first exiting thread, before it re-parents
    its children."""
    expected = os.environ.get("DLPERF_PARENT_PID")
    if not expected:
        return False
    deadline = time.monotonic() + wait_s
    while os.getppid() == int(expected):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


STOPPED = threading.Event()  # a signal or the lifeline stopped this agent: its parent may be dying


def stop_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM outside torchrun's launcher: exit through `finally`, not abruptly; a second one (lifeline and
    death signal both fire when the parent dies) must not cut the result or the clean-up short."""
    start_grace(128 + signum)
    if not STOPPED.is_set():
        STOPPED.set()
        raise SystemExit(128 + signum)


_GRACE = threading.Lock()  # held once the grace has started


def start_grace(code: int) -> None:
    """From the first stop on (the signal's handler, or the lifeline's watcher where the main thread is held in C
    and runs no handler), the agent has STOP_GRACE_S to end; the C-level timer after twice that is for a process in
    which no Python runs at all."""
    if _GRACE.acquire(blocking=False):
        threading.Thread(target=exit_after_grace, args=(code,), name="stop-grace", daemon=True).start()
        faulthandler.dump_traceback_later(2 * STOP_GRACE_S, exit=True)


def exit_after_grace(code: int) -> None:
    """The stop's SystemExit need not end the process: Python drops an exception raised where it cannot propagate
    (a `__del__`, a weakref or gc callback, a generator closed by the collector), and an exit waits for every
    non-daemon thread. An agent whose parent is gone must not keep measuring: after STOP_GRACE_S it prints where its
    threads are (the console keeps the evidence), removes an orphaned run folder and exits."""
    time.sleep(STOP_GRACE_S)
    print(f"dlperf agent: still running {STOP_GRACE_S:g} s after SIGTERM, exiting; its threads:", file=sys.stderr,
          flush=True)  # fmt: skip
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    remove_orphaned_run_dir()
    os._exit(code)


def remove_orphaned_run_dir() -> None:
    """Nobody reads this run's files once the parent is gone: remove its temporary folder (DLPERF_RUN_DIR)."""
    run_dir = os.environ.get("DLPERF_RUN_DIR")
    if run_dir and parent_gone(ORPHAN_WAIT_S if STOPPED.is_set() else 0.0):
        shutil.rmtree(run_dir, ignore_errors=True)


def read_spec_with_lifeline() -> AgentSpec:
    """The spec from stdin's first line; later, end of stdin SIGTERMs this agent, which stops its workers."""
    line = sys.stdin.buffer.readline()
    if not line.strip():
        raise SystemExit("dlperf agent: stdin closed before the spec arrived (the parent is gone)")
    spec = AgentSpec.from_json(line)
    threading.Thread(target=watch_lifeline, args=(0,), name="lifeline", daemon=True).start()
    return spec


def watch_lifeline(fd: int) -> None:
    """Until `fd` (the raw descriptor: a buffered reader's lock would hang shutdown) ends, then stop this agent."""
    while os.read(fd, 4096):
        pass
    if signal.getsignal(signal.SIGTERM) is stop_on_sigterm:  # not while torchrun's launcher stops its workers
        start_grace(128 + signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    try:
        if parent_gone():
            return 1  # the parent died before the death signal was armed: start nothing
        return run_agent(argv)
    finally:
        remove_orphaned_run_dir()


def run_agent(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlperf.launch.agent", description=__doc__)
    parser.add_argument("spec", help="JSON file with the run's config, log path and launch settings; - for stdin")
    parser.add_argument("result", help="where to write this node's JSON result (%%t: Slurm's task id)")
    args = parser.parse_args(argv)
    if args.spec == "-":
        spec = read_spec_with_lifeline()
    else:
        with open(args.spec, encoding="utf-8") as f:
            spec = AgentSpec.from_json(f.read())
    if spec.kind == "external":
        from dlperf.launch.external_node import launch  # another framework's own script
    elif spec.launch.one_process:
        from dlperf.launch.one_process import launch  # the rank runs here: its framework imported once
    else:
        from dlperf.launch.elastic import launch  # torch: imported only once the death signal is armed

    result = launch(spec)
    signal.signal(signal.SIGTERM, stop_on_sigterm)  # take the signal back from torchrun's launcher
    if result.failure and result.failure.stopped:
        STOPPED.set()
    if spec.launch.collect_env:
        engines = [] if spec.kind == "external" else [spec.run.get("engine", "torch")]  # a script's: unknown
        env = {"node": node_name(), **collect_environment(), **engine_versions(engines)}
        result = dataclasses.replace(result, env=env)
    write_text_atomic(args.result.replace("%t", os.environ.get("SLURM_PROCID", "0")), result.to_json())
    return 0 if result.ok else 1


def exit_stopped(code: int | str | None) -> None:
    """A stopped agent's exit skips the interpreter's finalization, which waits for every non-daemon thread and
    runs the framework's destructors (a process group's, a thread pool's): nothing is left to keep."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as error:  # the stop's, or a line saying why the agent cannot start
        code = error.code
    if STOPPED.is_set():
        exit_stopped(code)
    sys.exit(code)
