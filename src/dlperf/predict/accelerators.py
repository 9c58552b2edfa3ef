"""What a prediction needs to know of an accelerator it cannot run on: memory, memory bandwidth, the scale-up link
(NVLink / Infinity Fabric) and the usual system around it, each from a cited data sheet.

The dense peaks per precision are `dlperf.metrics.peaks`' table (one table, the one MFU divides by); this module
adds the rest. Link figures are per device and per direction (the data sheets' bidirectional totals halved). The
usual system is the vendor's reference server: how many devices share one scale-up domain (a node here) and the
scale-out network per device. Names are matched exactly (case and spacing aside), never by substring.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.errors import ConfigError
from dlperf.metrics.peaks import PEAK_TABLE, device_key

GIB = 1024**3


@dataclass(frozen=True)
class Accelerator:
    name: str  # the peak table's key
    memory_gib: float  # usable device memory as the data sheet gives it (GB read as GiB: the small gap is headroom)
    memory_tbs: float  # memory bandwidth, TB/s
    scale_up_gbs: float  # NVLink / xGMI / PCIe GB/s per direction per device
    devices_per_node: int  # the reference system's scale-up domain
    inter_node_gbit: float  # the reference system's scale-out network per device, Gbit/s
    source: str
    system: str
    peaks: str | None = None  # the peak table's key where it is not `name`

    def peak_tflops(self, precision: str) -> float | None:
        return PEAK_TABLE[self.peaks or self.name][0].get(precision)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB


_H100 = "NVIDIA H100 Tensor Core GPU data sheet (2023)"
_H200 = "NVIDIA H200 Tensor Core GPU data sheet (2024)"
_A100 = "NVIDIA A100 Tensor Core GPU data sheet (2021)"
_V100 = "NVIDIA Tesla V100 data sheet (2020)"
_B200 = "NVIDIA HGX B200 / DGX B200 specifications (8-GPU totals / 8)"
_GB200 = "NVIDIA GB200 NVL72 specifications (72-GPU totals / 72)"
_H800 = (
    "NVIDIA H800: H100 SXM's compute, NVLink cut to 400 GB/s (bidirectional); DeepSeek-V3 technical report, sec. 3.1"
)
_B300 = "NVIDIA HGX B300 specifications (8-GPU totals / 8): 288 GB HBM3e, 8 TB/s, NVLink 5, B200's dense bf16/fp8"
_GB300 = "NVIDIA GB300 NVL72 specifications (72-GPU totals / 72): 288 GB HBM3e, 8 TB/s, GB200's dense bf16/fp8"
_MI300X = "AMD Instinct MI300X data sheet (2023); 7 Infinity Fabric links of 128 GB/s (bidirectional) per GPU"
_DGX_H = "DGX H100/H200: 8 GPUs on NVSwitch, 8 ConnectX-7 NICs (400 Gb/s InfiniBand per GPU)"

ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator("H100 SXM", 80, 3.35, 450, 8, 400, _H100, _DGX_H),
        Accelerator("H100 PCIe", 80, 2.0, 64, 8, 200, _H100,
                    "a PCIe Gen5 server of 8 GPUs without NVLink bridges, 200 Gb/s per GPU (no reference system)"),
        Accelerator("H100 NVL", 94, 3.9, 300, 8, 200, _H100, "NVLink bridges in pairs (600 GB/s), 200 Gb/s per GPU"),
        Accelerator("H100 SXM 96GB 500W", 96, 2.4, 450, 8, 400,
                    "torchtitan benchmarks/llama3_h100_202412_torchtitan.md (its peak unknown: H100 SXM's taken)",
                    "Grand Teton: 8 GPUs on NVLink, 400 Gb/s RDMA per GPU", peaks="H100 SXM"),
        Accelerator("H200 SXM", 141, 4.8, 450, 8, 400, _H200, _DGX_H),
        Accelerator("A100 SXM 40GB", 40, 1.555, 300, 8, 200, _A100,
                    "DGX A100: 8 GPUs on NVSwitch, 8 ConnectX-6 NICs (200 Gb/s HDR InfiniBand per GPU)"),
        Accelerator("A100 SXM 80GB", 80, 2.039, 300, 8, 200, _A100,
                    "DGX A100: 8 GPUs on NVSwitch, 8 ConnectX-6 NICs (200 Gb/s HDR InfiniBand per GPU)"),
        Accelerator("A100 PCIe 80GB", 80, 1.935, 32, 8, 100, _A100,
                    "a PCIe Gen4 server of 8 GPUs without NVLink bridges, 100 Gb/s per GPU (no reference system)"),
        Accelerator("V100 SXM2", 32, 0.9, 150, 8, 50, _V100,
                    "DGX-1V: 8 GPUs in an NVLink hybrid cube mesh, 4 x 100 Gb/s EDR InfiniBand per 8 GPUs"),
        Accelerator("B200", 180, 8.0, 900, 8, 400, _B200,
                    "DGX B200: 8 GPUs on NVSwitch (NVLink 5), 8 ConnectX-7 NICs (400 Gb/s per GPU)"),
        Accelerator("GB200", 186, 8.0, 900, 72, 400, _GB200,
                    "GB200 NVL72: one NVLink domain of 72 GPUs, 400 Gb/s ConnectX-7 per GPU between racks"),
        Accelerator("H800 SXM", 80, 3.35, 200, 8, 400, _H800,
                    "DeepSeek's H800 cluster: 8 GPUs on NVLink, 8 x 400 Gb/s InfiniBand per node (report sec. 3.1)",
                    peaks="H100 SXM"),
        Accelerator("B300", 288, 8.0, 900, 8, 800, _B300,
                    "DGX B300: 8 GPUs on NVSwitch (NVLink 5), 8 ConnectX-8 NICs (800 Gb/s per GPU)", peaks="B200"),
        Accelerator("GB300", 288, 8.0, 900, 72, 800, _GB300,
                    "GB300 NVL72: one NVLink domain of 72 GPUs, 800 Gb/s ConnectX-8 per GPU between racks",
                    peaks="GB200"),
        Accelerator("MI300X", 192, 5.3, 448, 8, 400, _MI300X,
                    "an 8-GPU MI300X platform (xGMI fully connected), 400 Gb/s per GPU"),
    )
}  # fmt: skip


def accelerator(name: str) -> Accelerator:
    """The entry for a device name (the peak table's key or an NVML/torch name); one line naming the choices."""
    own = {_spelling(key): key for key in ACCELERATORS}
    key = own.get(_spelling(name)) or device_key(name)
    if key is None or key not in ACCELERATORS:
        family = [k for k in ACCELERATORS if _spelling(k).split()[0] == _spelling(name)]
        if len(family) == 1:
            return ACCELERATORS[family[0]]
        choices = ", ".join(family or ACCELERATORS)
        raise ConfigError(
            f"unknown accelerator {name!r}: give one of {choices} (case, spaces, '-' and '_' alike; or the name "
            "nvidia-smi reports)"
        )
    return ACCELERATORS[key]


def _spelling(name: str) -> str:
    """How a user may write a name: `H100-SXM`, `h100_sxm` and `H100 SXM` are one."""
    return " ".join(name.replace("-", " ").replace("_", " ").split()).casefold()
