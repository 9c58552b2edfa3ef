"""Which accelerator a run used, said exactly enough to compare it with a published figure for the same device.

The name is the one the framework reported for rank 0's device (the CPU model on CPUs); `model` is that name in
dlperf's device table (metrics/peaks.py, exact names only, e.g. `NVIDIA H100 80GB HBM3` -> `H100 SXM`), null for a
name it does not know; memory, NVLink links and the PCIe link come from NVML on rank 0's node, from the GPU of that
name (the environment lists every GPU of the machine, in NVML's order).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from dlperf.machine.env_diff import env_nodes
from dlperf.metrics.peaks import device_key
from dlperf.records.parts import Accelerator


def accelerator_identity(
    device_type: str | None, device_name: str | None, env: dict[str, Any], count: int, per_node: int
) -> dict[str, Any]:
    """Record field `accelerator`. Without a device from the ranks (an external command's or a failed run) the
    node's GPUs are the devices when `device_type` is None or `cuda` and the node has any, else its CPU."""
    node = env_nodes(env)[0]  # rank 0's node
    gpus = node.get("gpus") or []
    if device_type == "cuda" or (device_type is None and gpus):
        facts = _gpu(device_name, gpus)
    elif device_type not in (None, "cpu"):  # a device NVML does not know (a TPU under JAX): the framework's name
        facts = _named(device_type, device_name)
    else:
        facts = _cpu(node)
    facts |= {"count": count, "per_node": per_node}
    return {field.name: facts[field.name] for field in fields(Accelerator)}  # in the record's order


def _gpu(device_name: str | None, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    """The GPU of that name as NVML lists it (the first GPU where no name is given)."""
    facts = next((g for g in gpus if device_name in (None, g.get("name"))), None) or {}
    name = device_name or facts.get("name")
    return {
        "kind": "cuda",
        "name": name,
        "model": device_key(name) if name else None,
        "memory_gib": round(facts["memory_mib"] / 1024, 1) if facts.get("memory_mib") else None,
        "interconnect": facts.get("interconnect"),
        "source": "NVML" if facts else "the framework's device name (NVML did not list it)",
    }


def _named(device_type: str, device_name: str | None) -> dict[str, Any]:
    return {
        "kind": device_type,
        "name": device_name,
        "model": device_key(device_name or "") or None,
        "memory_gib": None,
        "interconnect": None,
        "source": "the framework's device name",
    }


def _cpu(node: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "cpu",
        "name": node.get("cpu"),
        "model": None,
        "memory_gib": node.get("memory_gib"),
        "interconnect": None,
        "source": "/proc/cpuinfo (the host's memory)",
    }
