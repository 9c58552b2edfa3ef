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


def _gpus(nvml: Any = None) -> list[dict[str, Any]]:
    """Name, memory, driver and links of each GPU of the machine, through NVML where it loads (`nvml`: the module).

    Every query is asked on its own and a fact NVML refuses is None: on a MIG-enabled GPU in a container without
    privileges, `nvmlDeviceGetMemoryInfo` of the parent raises (NVML_ERROR_NO_PERMISSION), and one refused query
    must not cost the record its every other fact. A MIG-enabled GPU also lists its instances (`mig`), named by
    NVML's `MIG-` UUIDs, with their own memory: the memory a run there has."""
    try:
        if nvml is None:
            import pynvml as nvml

        nvml.nvmlInit()
    except Exception:  # no NVIDIA driver: a CPU machine
        return []
    try:
        driver = _ask(nvml.nvmlSystemGetDriverVersion)
        gpus = []
        for index in range(_ask(nvml.nvmlDeviceGetCount) or 0):
            handle = _ask(nvml.nvmlDeviceGetHandleByIndex, index)
            if handle is None:
                gpus.append({"index": index, "name": None, "memory_mib": None, "driver": _text(driver)})
                continue
            gpu = {
                "index": index,
                "name": _text(_ask(nvml.nvmlDeviceGetName, handle)),
                "memory_mib": _memory_mib(nvml, handle),
                "driver": _text(driver),
                "interconnect": _links(nvml, handle),
            }
            instances = _mig_instances(nvml, handle)
            if instances is not None:
                gpu["mig"] = instances
            gpus.append(gpu)
        return gpus
    finally:
        _ask(nvml.nvmlShutdown)


def _ask(query: Any, *args: Any) -> Any:
    """One NVML query, or None where NVML refuses it (NVMLError_NoPermission, _NotSupported and kin)."""
    try:
        return query(*args)
    except Exception:  # noqa: BLE001 - pynvml raises a class per error code; any of them means "unknown"
        return None


def _memory_mib(nvml: Any, handle: Any) -> int | None:
    info = _ask(nvml.nvmlDeviceGetMemoryInfo, handle)
    return None if info is None else int(info.total) // (1024 * 1024)


def _mig_instances(nvml: Any, handle: Any) -> list[dict[str, Any]] | None:
    """The MIG instances of a GPU in MIG mode (UUID as NVML names it, memory), or None where MIG is off or
    NVML cannot tell."""
    if not hasattr(nvml, "nvmlDeviceGetMigMode"):
        return None
    mode = _ask(nvml.nvmlDeviceGetMigMode, handle)
    if not mode or not mode[0]:  # (current, pending); a part without MIG raises NotSupported
        return None
    instances = []
    for slot in range(_ask(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
        mig = _ask(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
        if mig is not None:  # an empty slot raises NotFound
            instances.append({"uuid": _text(_ask(nvml.nvmlDeviceGetUUID, mig)), "memory_mib": _memory_mib(nvml, mig)})
    return instances


def _links(nvml: Any, handle: Any) -> dict[str, int | None]:
    """NVLink links up and the PCIe link's generation and width (the most the link and device support); None where
    NVML cannot tell (no NVLink on the part, an old driver)."""

    links = range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))
    known = [state for link in links if (state := _ask(nvml.nvmlDeviceGetNvLinkState, handle, link)) is not None]
    return {
        "nvlink_links": sum(1 for state in known if state) if known else None,
        "pcie_generation": _ask(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "pcie_width": _ask(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    }


def _text(value: str | bytes | None) -> str | None:
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
