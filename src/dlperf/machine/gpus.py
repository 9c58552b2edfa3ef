"""Which NVML devices a run's GPUs are, for the node's meters (energy, other processes).

A framework numbers the GPUs it sees: those CUDA_VISIBLE_DEVICES lists, in that order (entries are indices, or
`GPU-`/`MIG-` UUIDs, possibly shortened to a unique prefix), in CUDA_DEVICE_ORDER (FASTEST_FIRST by default). NVML
numbers every GPU of the machine in PCI bus order and ignores both variables, so a framework's device 0 need not
be NVML's device 0. A GPU is therefore named by its UUID where the framework reports one (PyTorch does), else by
its CUDA_VISIBLE_DEVICES entry, and only without either by its index.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

GpuId = int | str  # an NVML index, or a (prefix of a) UUID


def visible_gpu_ids(count: int, uuids: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ):
    """The NVML names of this process's first `count` GPUs: `uuids` when the framework gave them, else the entries
    of CUDA_VISIBLE_DEVICES (CUDA ignores everything from the first invalid entry on), else 0..count-1."""
    if uuids:
        return list(uuids[:count])
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return list(range(count))
    ids: list[GpuId] = []
    for entry in (item.strip() for item in listed.split(",")):
        if entry.isdigit():
            ids.append(int(entry))
        elif entry.startswith(("GPU-", "MIG-")):
            ids.append(entry)
        else:
            break
    return ids[:count]


def nvml_names(uuids: Sequence[str], environ: Mapping[str, str] = os.environ) -> list[str]:
    """CUDA's device UUIDs as NVML names them. CUDA reports the bare UUID of a GPU and of a MIG instance alike;
    NVML names the one `GPU-<uuid>` and the other `MIG-<uuid>`. A MIG instance that CUDA_VISIBLE_DEVICES lists
    keeps its `MIG-` name here; one a container exposes without the variable is found by `nvml_handles`."""
    listed = [e.strip() for e in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip().startswith("MIG-")]
    names = []
    for uuid in uuids:
        if uuid.startswith(("GPU-", "MIG-")):
            names.append(uuid)
        else:
            names.append(("MIG-" if any(f"MIG-{uuid}".startswith(e) for e in listed) else "GPU-") + uuid)
    return names


def _uuid(nvml: Any, handle: Any) -> str:
    uuid = nvml.nvmlDeviceGetUUID(handle)
    return uuid.decode() if isinstance(uuid, bytes) else uuid


def nvml_handles(nvml: Any, ids: Sequence[GpuId]) -> list[Any]:
    """NVML handles for `ids` (see `visible_gpu_ids`); a UUID prefix must match exactly one device."""
    handles = []
    every: list[tuple[str, Any]] | None = None
    for gpu in ids:
        if isinstance(gpu, int):
            handles.append(nvml.nvmlDeviceGetHandleByIndex(gpu))
            continue
        if every is None:
            every = []
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                every.append((_uuid(nvml, handle), handle))
        found = [handle for uuid, handle in every if uuid.startswith(gpu)]
        if len(found) == 1:
            handles.append(found[0])
        elif not found and gpu.startswith("GPU-"):  # no GPU of that UUID: a MIG instance CUDA named bare
            handles.append(_by_uuid(nvml, gpu, "MIG-" + gpu[4:]))
        else:  # a MIG instance, or an ambiguous prefix: NVML's own look-up, or its error
            handles.append(nvml.nvmlDeviceGetHandleByUUID(gpu))
    return handles


def _by_uuid(nvml: Any, name: str, other: str) -> Any:
    """NVML's handle of `name`, else of `other`; the error about `name` where neither is a device."""
    try:
        return nvml.nvmlDeviceGetHandleByUUID(name)
    except Exception:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(other)
        except Exception:
            pass
        raise


def others_on_gpus(
    processes: Sequence[Mapping[str, Any]], own: set[int]
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The compute processes NVML lists on our GPUs that are not ours, or None with the reason when NVML's PIDs
    cannot be compared with ours: in a container (its own PID namespace) NVML reports the host's PIDs, so none
    of our processes, which hold a context on every GPU they run on, appears under its own PID."""
    if processes and not any(p["pid"] in own for p in processes):
        return None, (
            "NVML's process IDs are not this PID namespace's (a container?): none of this run's processes is "
            "listed on its own GPUs, so other processes on them cannot be told apart; check skipped"
        )
    return [dict(p) for p in processes if p["pid"] not in own], None
