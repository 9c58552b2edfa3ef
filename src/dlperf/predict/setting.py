"""What a prediction at scale runs on and with, whatever the workload: the run's switches, the device, the links (the
hierarchical ring collectives over them), all of them with where each figure came from (`Setting`, made by
`calibration.setting_for`), and what a workload's predictor gives `dlperf predict` (`Predictor`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dlperf.errors import ConfigError
from dlperf.metrics.bandwidth import bus_factor
from dlperf.predict.accelerators import Accelerator
from dlperf.predict.model import Link, group_span


@dataclass(frozen=True)
class Training:
    """The run's switches that change time or memory but not the layout."""

    precision: str = "amp-bf16"  # amp-bf16 (16-bit compute, fp32 master weights) or fp32
    float8: bool = False
    checkpointing: str = "none"  # none, selective, full
    recompute_mm_share: float = 0.0  # of the block matmuls recomputed under selective (torchtitan's per-op: 0.5)
    async_tp: bool = False
    overlap: bool = True  # False: communication hides behind nothing (gloo on CPUs runs it on the computing cores)
    loss_parallel: bool = False  # torchtitan's: the loss on the vocabulary shards; dlperf gathers the logits
    fused_optimizer: bool = True  # AdamW's fused kernel (dlperf on CUDA, torchtitan); unfused (CPU) makes temporaries
    cp_kv_heads: bool = False  # the CP ring passes keys and values at their own (GQA) heads (Megatron's Transformer
    # Engine); dlperf and torchtitan repeat them to the query heads before attention, and the ring passes those
    cp_all_gather: bool = False  # keys and values all-gathered at their GQA heads before attention, not hidden
    # (Llama 3's CP: Dubey et al. 2024, section 3.3.2)
    distributed_optimizer: bool = False  # Megatron's: 16-bit weights and fp32 gradients whole on every rank, the
    # fp32 master weights and moments sharded (the MoE model's experts; the Llama model keeps FSDP's memory)
    te_layers: bool = False  # Transformer Engine's fused layers under sequence parallelism (Megatron's): what a
    # block keeps for backward, every tensor sharded over tp (predict_model._activations_per_token)

    @property
    def act_bytes(self) -> int:
        return 4 if self.precision == "fp32" else 2


@dataclass(frozen=True)
class Device:
    """One device's rates and memory as the prediction uses them; `efficiency` is the achieved fraction of
    `peak_tflops` on the model's FLOPs, `source` says where each figure came from."""

    peak_tflops: float  # dense, at the run precision
    efficiency: float
    memory_bytes: float
    memory_bytes_per_s: float
    fp8_peak_tflops: float | None = None
    fp8_efficiency: float | None = None
    source: dict[str, str] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.peak_tflops * 1e12 * self.efficiency

    @property
    def fp8_rate(self) -> float:
        if not self.fp8_peak_tflops or not self.fp8_efficiency:
            raise ConfigError("float8 needs a device with fp8 units and an fp8 efficiency: drop --float8")
        return self.fp8_peak_tflops * 1e12 * self.fp8_efficiency


@dataclass(frozen=True)
class Network:
    """The links; `intra_ops` and `inter_ops` hold a collective's own fit where commbench measured it (gloo's
    all-gather and reduce-scatter are far slower per byte than its all-reduce), the others use `intra`/`inter`."""

    devices_per_node: int
    intra: Link  # the scale-up link, per device
    inter: Link  # each device's NIC
    intra_ops: dict[str, Link] = field(default_factory=dict)  # op -> its own fit (all_gather, send_recv, ...)
    inter_ops: dict[str, Link] = field(default_factory=dict)

    def collective_s(self, op: str, size_bytes: float, n: int, stride: int) -> float:
        """A ring collective of `size_bytes` (nccl-tests' whole buffer) over n ranks `stride` apart, hierarchical
        over nodes (a ring inside each node, then one across the nodes through each device's NIC)."""
        if n <= 1 or size_bytes <= 0:
            return 0.0
        per_node, nodes = group_span(stride, n, self.devices_per_node)
        steps = (lambda k: 2 * (k - 1)) if op == "all_reduce" else (lambda k: k - 1)
        intra, inter = self._links(op)
        time = 0.0
        if per_node > 1:
            time += steps(per_node) * intra.alpha_s
            time += bus_factor(op, per_node) * size_bytes * intra.beta_s_per_byte
        if nodes > 1:
            time += steps(nodes) * inter.alpha_s
            time += bus_factor(op, nodes) * size_bytes / per_node * inter.beta_s_per_byte
        return time

    def send_s(self, size_bytes: float, stride: int) -> float:
        """One point-to-point message to the rank `stride` away (another node's when the stride crosses one)."""
        intra, inter = self._links("send_recv")
        link = inter if stride >= self.devices_per_node else intra
        return link.alpha_s + size_bytes * link.beta_s_per_byte

    def _links(self, op: str) -> tuple[Link, Link]:
        """(intra-node, inter-node) links that time `op`: its own fit where measured, else the general ones."""
        return self.intra_ops.get(op, self.intra), self.inter_ops.get(op, self.inter)


@dataclass(frozen=True)
class Setting:
    """Everything but the layout: the device, the links, the stack's switches."""

    accelerator: Accelerator
    device: Device
    network: Network
    training: Training
    sources: dict[str, str]


class Predictor(NamedTuple):
    """What a workload's `predictor` names for `dlperf predict --model NAME`: its config fields that change no time
    or memory (no flag for them), and what the command prints, (the workload's values with nodes, devices_per_node
    and precision, the setting, --search, --top, --json) -> JSON (a dict) or lines."""

    ignored: frozenset[str]
    shown: Callable[[dict[str, Any], Setting, bool, int, bool], dict | list[str]]
