"""NVML on a MIG-split GPU in a container, with a fake NVML module: every refused query leaves its fact unknown and
the others read, MIG instances keep NVML's `MIG-` names, and the preflight's memory is the instance's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlperf.machine.environment import _gpus
from dlperf.machine.gpus import nvml_handles, nvml_names
from dlperf.orchestration.preflight import machine_from_env

PARENT = "GPU-5c1b7c3e-0000-1111-2222-333344445555"
MIG_1 = "MIG-9f2a0d11-aaaa-bbbb-cccc-000000000001"  # NVML's new-style MIG UUIDs (driver R470 on)
MIG_2 = "MIG-9f2a0d11-aaaa-bbbb-cccc-000000000002"


class NoPermission(Exception):
    """pynvml's NVMLError_NoPermission."""


class NotSupported(Exception):
    """pynvml's NVMLError_NotSupported."""


class MigNvml:
    """One H100 split into two MIG instances; as an unprivileged container sees it: the parent's memory, links and
    energy are refused, the instances answer."""

    def __init__(self) -> None:
        self.shut = False

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"570.86.15"

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return "parent"

    def nvmlDeviceGetName(self, handle: str) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: str) -> str:
        return {"parent": PARENT, "mig1": MIG_1, "mig2": MIG_2}[handle]

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> SimpleNamespace:
        if handle == "parent":
            raise NoPermission("Insufficient Permissions")
        return SimpleNamespace(total={"mig1": 40192, "mig2": 19968}[handle] * 2**20)

    def nvmlDeviceGetNvLinkState(self, handle: str, link: int) -> int:
        raise NoPermission("Insufficient Permissions")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: str) -> int:
        raise NotSupported("Not Supported")

    nvmlDeviceGetMaxPcieLinkWidth = nvmlDeviceGetMaxPcieLinkGeneration

    def nvmlDeviceGetMigMode(self, handle: str) -> tuple[int, int]:
        return (1, 1)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: str) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: str, slot: int) -> str:
        if slot > 1:
            raise NotSupported("Not Found")  # an empty slot
        return f"mig{slot + 1}"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        by_uuid = {PARENT: "parent", MIG_1: "mig1", MIG_2: "mig2"}
        if uuid not in by_uuid:
            raise NotSupported(f"Not Found: {uuid}")
        return by_uuid[uuid]


def test_refused_queries_leave_the_fact_unknown_and_mig_instances_listed():
    nvml = MigNvml()
    (gpu,) = _gpus(nvml)
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["driver"] == "570.86.15"
    assert gpu["memory_mib"] is None  # NVML_ERROR_NO_PERMISSION on the parent: unknown, not a failed record
    assert gpu["interconnect"] == {"nvlink_links": None, "pcie_generation": None, "pcie_width": None}
    assert gpu["mig"] == [{"uuid": MIG_1, "memory_mib": 40192}, {"uuid": MIG_2, "memory_mib": 19968}]
    assert nvml.shut
    # the preflight compares a run with the smallest instance (the memory a rank there has), not 0 or the parent
    assert machine_from_env({"gpus": [gpu]}).gpu_memory_bytes == (19968 * 2**20,)
    assert machine_from_env({"gpus": [{**gpu, "mig": None}]}).gpu_memory_bytes == (0,)  # unknown refuses nothing


def test_a_failing_count_or_driver_query_is_no_gpu_and_no_traceback():
    nvml = MigNvml()
    nvml.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(NoPermission("Insufficient Permissions"))
    assert _gpus(nvml) == [] and nvml.shut


def test_mig_uuids_keep_nvmls_names():
    bare_mig, bare_gpu = MIG_1[4:], PARENT[4:]  # what torch's device properties give: no prefix
    # CUDA_VISIBLE_DEVICES names the instance (full or a prefix): its MIG- name; anything else a GPU- name
    assert nvml_names([bare_mig], {"CUDA_VISIBLE_DEVICES": MIG_1}) == [MIG_1]
    assert nvml_names([bare_mig], {"CUDA_VISIBLE_DEVICES": MIG_1[:12]}) == [MIG_1]
    assert nvml_names([bare_gpu], {}) == [PARENT]
    assert nvml_names([MIG_2], {}) == [MIG_2]  # already named
    # a container's MIG slice without the variable: named GPU-, found as the MIG instance NVML knows
    nvml = MigNvml()
    assert nvml_handles(nvml, nvml_names([bare_mig], {})) == ["mig1"]
    assert nvml_handles(nvml, [MIG_2, PARENT]) == ["mig2", "parent"]
    with pytest.raises(NotSupported, match="GPU-0000"):  # neither name is a device: NVML's error about ours
        nvml_handles(nvml, ["GPU-0000"])
