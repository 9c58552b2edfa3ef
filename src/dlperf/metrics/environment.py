"""The environment every record carries, captured rather than pasted by hand."""

from __future__ import annotations

import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _command_output(args: list[str], cwd: str | None = None) -> str | None:
    """stdout of a short command, or None where it is missing or fails."""
    if shutil.which(args[0]) is None:
        return None
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=20, cwd=cwd, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    # nvidia-smi underlines headers with terminal escapes even into a pipe
    return ANSI_ESCAPE.sub("", done.stdout).strip() if done.returncode == 0 else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> list[dict[str, Any]]:
    """Name, memory and driver of each visible GPU, through NVML where it loads."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVIDIA driver: a CPU machine
        return []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "memory_mib": pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                    "driver": _text(driver),
                }
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def git_commit(cwd: str | None = None) -> dict[str, Any] | None:
    """The commit of the dlperf that runs (its source folder, not the current directory), and whether it has
    uncommitted changes; None for an installed release outside a git checkout."""
    cwd = cwd or str(Path(__file__).resolve().parent)
    commit = _command_output(["git", "rev-parse", "HEAD"], cwd=cwd)
    if commit is None:
        return None
    status = _command_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd)
    return {"commit": commit, "dirty": bool(status)}


def collect_environment() -> dict[str, Any]:
    """The machine's facts; each engine adds its own versions (`dlperf.engines.engine_versions`)."""
    memory = psutil.virtual_memory()
    return {
        "host": socket.gethostname(),
        "cpu": _cpu_model(),
        "cpu_cores": psutil.cpu_count(logical=False),
        "cpu_threads": psutil.cpu_count(logical=True),
        "memory_gib": round(memory.total / 2**30, 1),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "gpus": _gpus(),
        "topology": _command_output(["nvidia-smi", "topo", "-m"]),
        "git": git_commit(),
    }
