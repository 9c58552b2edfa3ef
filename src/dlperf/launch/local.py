"""Run one node's agent as a child process: its own process group, a time limit, nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from dlperf.launch.options import LaunchOptions
from dlperf.reporting.layout import RunPaths

KILL_GRACE_S = 10.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now, for the c10d rendezvous store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


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


def run_agent(spec: dict[str, Any], spec_path: Path, result_path: Path, console_path: Path, timeout: float) -> dict:
    """Start `python -m dlperf.launch.agent` and wait; a timeout or a dead agent becomes a failed result."""
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(console_path, "ab") as console:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dlperf.launch.agent", str(spec_path), str(result_path)],
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process_group(proc)
            return {
                "status": "failed",
                "error": f"timed out after {timeout:g} s: raise --timeout or lower --iters",
            }
        except BaseException:
            stop_process_group(proc)
            raise
        finally:
            stop_process_group(proc)
    if result_path.exists():
        return json.loads(result_path.read_text(encoding="utf-8"))
    code = proc.returncode
    reason = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
    return {"status": "failed", "error": f"launcher {reason} before writing a result; see {console_path}"}


class LocalLauncher:
    """One agent on this machine, its rendezvous on loopback."""

    def __init__(self, options: LaunchOptions) -> None:
        self.options = options

    def _spec(self, spec: dict[str, Any], workdir: Path) -> dict[str, Any]:
        port = self.options.master_port or free_port()
        launch = {**spec["launch"], "rdzv_endpoint": f"127.0.0.1:{port}", "log_dir": str(workdir / "elastic")}
        return {**spec, "launch": launch}

    def describe(self, spec: dict[str, Any], paths: RunPaths) -> list[str]:
        workdir = Path("$TMPDIR/dlperf-XXXX")
        return [
            f"# spec in {workdir / 'spec.json'}:",
            json.dumps(self._spec(spec, workdir)),
            shlex.join([sys.executable, "-m", "dlperf.launch.agent", f"{workdir}/spec.json", f"{workdir}/result.json"]),
        ]

    def run(self, spec: dict[str, Any], workdir: Path, paths: RunPaths, timeout: float) -> dict[str, Any]:
        return run_agent(
            self._spec(spec, workdir), workdir / "spec.json", workdir / "result.json", paths.console, timeout
        )
