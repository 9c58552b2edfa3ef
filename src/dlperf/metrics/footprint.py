"""What a training run needs in memory, estimated before anything starts (torch-free arithmetic).

Per rank: weights, gradients and optimizer state (bytes per parameter below) plus the activations kept for the
backward pass. The figures are estimates meant to catch a run that cannot fit (a 1.5B-parameter GPT on a 24 GiB
box), not to predict the measured peak: allocator caches, workspaces and fragmentation come on top.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.wording import count, magnitude

GIB = 2**30

# weights + gradients (fp32 masters under AMP too), + optimizer state per parameter
OPTIMIZER_STATE_BYTES = {"adamw": 8, "sgd-momentum": 4}
# autocast keeps a 16-bit copy of each weight it casts
AMP_WEIGHT_COPY_BYTES = 2


def activation_bytes_per_element(precision: str) -> int:
    return 4 if precision == "fp32" else 2


def state_bytes(params: int, optimizer: str, precision: str) -> int:
    """Weights, gradients and optimizer state of `params` parameters."""
    per_param = 4 + 4 + OPTIMIZER_STATE_BYTES[optimizer]
    if precision != "fp32":
        per_param += AMP_WEIGHT_COPY_BYTES
    return params * per_param


@dataclass(frozen=True)
class Footprint:
    """One rank's estimated memory; `params_total` is the whole model's parameter count."""

    params_total: int
    params_per_rank: int
    state_bytes: int
    activation_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.activation_bytes

    def describe(self) -> str:
        return (
            f"{magnitude(self.params_total)} parameters, about {self.total_bytes / GIB:.1f} GiB per rank "
            f"({self.state_bytes / GIB:.1f} GiB weights, gradients and optimizer state, "
            f"{self.activation_bytes / GIB:.1f} GiB activations)"
        )


@dataclass(frozen=True)
class Machine:
    """What one node offers: CPU cores, host memory, and each visible GPU's memory."""

    cpu_cores: int
    memory_bytes: int
    gpu_memory_bytes: tuple[int, ...] = ()


def fit_problems(footprint: Footprint, ranks_per_node: int, on_gpu: bool, machine: Machine) -> list[str]:
    """Why `ranks_per_node` ranks of this footprint will not fit or will oversubscribe the machine; empty if fine."""
    problems = []
    over = over_memory(footprint, ranks_per_node, on_gpu, machine)
    if on_gpu:
        if over:
            problems.append(f"a rank needs more than the {min(machine.gpu_memory_bytes) / GIB:.0f} GiB of its GPU")
        if machine.gpu_memory_bytes and ranks_per_node > len(machine.gpu_memory_bytes):
            problems.append(
                f"{count(ranks_per_node, 'rank')} per node for {count(len(machine.gpu_memory_bytes), 'GPU')}"
            )
        return problems
    if over:
        problems.append(
            f"{ranks_per_node} CPU ranks need about {footprint.total_bytes * ranks_per_node / GIB:.0f} GiB but the "
            f"machine has {machine.memory_bytes / GIB:.0f} GiB (it will swap or be killed)"
        )
    if ranks_per_node > machine.cpu_cores:
        problems.append(f"{ranks_per_node} CPU ranks share {machine.cpu_cores} cores (oversubscribed: slow and noisy)")
    return problems


def over_memory(footprint: Footprint, ranks_per_node: int, on_gpu: bool, machine: Machine) -> bool:
    """The estimate is above the memory there is (a GPU's, or the host's for all CPU ranks together): such a run
    swaps the machine to a halt or calls the OOM killer onto it, so it is refused unless forced. Unknown memory
    (0) refuses nothing."""
    if on_gpu:
        smallest = min(machine.gpu_memory_bytes, default=0)
        return bool(smallest) and footprint.total_bytes > smallest
    return bool(machine.memory_bytes) and footprint.total_bytes * ranks_per_node > machine.memory_bytes
