"""The parent's side of the PyTorch engine: its checks before any process starts and its versions for the record.

torch is imported here only where a GPU may be in play (a GPU driver's device node exists, or the process has
torch already): on a CPU machine the parent of every run would otherwise spend 2 to 3 s importing it, for facts
that its installed files already state.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.spec import RunSpec

GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")  # NVIDIA's driver, ROCm's, WSL's


def _gpu_possible() -> bool:
    return "torch" in sys.modules or any(os.path.exists(node) for node in GPU_DEVICE_NODES)


def cuda_available() -> bool:
    """torch's own answer where a GPU may be present; without any GPU driver torch sees none."""
    if not _gpu_possible():
        return False
    import torch

    return torch.cuda.is_available()


def device_kind(choice: str) -> str:
    """`auto` takes CUDA when present."""
    if choice == "auto":
        return "cuda" if cuda_available() else "cpu"
    return choice


def check_precision_on_device(precision: str, device_type: str) -> None:
    """fp16 autocast with a loss scaler is a CUDA path; refuse it up front elsewhere."""
    if precision == "amp-fp16" and device_type != "cuda":
        raise ConfigError("amp-fp16 needs a CUDA device: use --precision amp-bf16 or fp32 on the CPU")


def preflight(spec: RunSpec, local: bool) -> None:
    """The precision on this device kind and, for CUDA, the devices this machine has; `local` says the devices are
    on this machine (else the workers check them there)."""
    if not local:
        return
    kind = device_kind(spec.device)
    check_precision_on_device(spec.precision, kind)
    if kind == "cuda":
        if not cuda_available():
            raise ConfigError("--device cuda asked for, but no CUDA device is visible: use --device cpu")
        import torch

        available = torch.cuda.device_count()
        if spec.devices_per_node > available:
            raise ConfigError(
                f"asked for {spec.devices_per_node} CUDA devices per node but this machine has {available}: "
                f"lower --devices-per-node"
            )


def _torch_version() -> str | None:
    """`torch.__version__` as torch/version.py states it (its local part, `+cu130`, included, which the package
    metadata may lack), read without importing torch."""
    found = importlib.util.find_spec("torch")
    if found is None or found.origin is None:
        return None
    path = Path(found.origin).with_name("version.py")
    spec = importlib.util.spec_from_file_location("dlperf_torch_version", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.__version__)


def versions() -> dict[str, Any]:
    """torch's and torchvision's versions and CUDA's facts; torchvision's from its metadata (importing it, and
    torch._dynamo with it, would cost 2 s more)."""
    try:
        vision = version("torchvision")
    except PackageNotFoundError:
        vision = None
    facts: dict[str, Any] = {
        "torch": _torch_version(),
        "torchvision": vision,
        "cuda_available": cuda_available(),
        "cuda": None,
        "cudnn": None,
        "nccl": None,
    }
    if facts["cuda_available"]:  # a CUDA build on a machine without a GPU claims no CUDA version
        import torch

        facts["cuda"] = torch.version.cuda
        facts["cudnn"] = torch.backends.cudnn.version()
        nccl = torch.cuda.nccl.version()
        facts["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    return facts
