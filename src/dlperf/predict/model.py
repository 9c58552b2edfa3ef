"""Predicted step time, throughput and speedup at N devices x M nodes from a 1-device run and link fits.

The model, stated once:

- A link is an alpha-beta pair: `alpha_s` per message step, `beta_s_per_byte` per byte crossing it.
- Ring all-reduce of S bytes over n ranks on one link: 2(n-1) steps of S/n bytes each,
  2(n-1)·alpha + 2(n-1)/n·S·beta.
- Over M nodes of N devices, hierarchical (as NCCL does with its tree/ring mix, reduced to the ring form):
  reduce-scatter inside each node, N concurrent all-reduces of S/N across nodes, all-gather inside each node:
  2(N-1)·a_intra + 2(N-1)/N·S·b_intra + 2(M-1)·a_inter + 2(M-1)/M·S·b_inter. The N inter-node shards share
  the node's network link, so together they carry S through it: `inter` is the node's link, not a GPU's.
- Data parallel (DDP): the per-device batch is fixed (weak scaling), compute per device is unchanged, gradients
  are packed in buckets (the first capped at 1 MiB, the others at 25 MiB, the DDP defaults) in the order they
  become ready, which is the reverse of the layers; gradient bytes become ready uniformly over the backward pass.
  Buckets are all-reduced one after another on one stream as soon as they are ready and the previous one is done;
  the step grows by whatever of the last all-reduce ends after the backward pass (the exposed part).
  Compute is not slowed by the communication running beside it. Where it is — gloo on CPUs, whose all-reduce
  runs on the cores that compute — `overlap=False` hides nothing: the whole all-reduce time is added.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from dlperf.errors import ConfigError
from dlperf.metrics.bandwidth import AlphaBetaFit, bus_factor

MIB = 1024 * 1024
DDP_BUCKET_BYTES = 25 * MIB
DDP_FIRST_BUCKET_BYTES = 1 * MIB
MAX_GRADIENT_BYTES = 2**60  # an exbibyte: far beyond any model, still exact in the float arithmetic below


def _ring_steps(op: str, n: int) -> int:
    if op == "all_reduce":
        return 2 * (n - 1)
    return n - 1 if op in ("all_gather", "reduce_scatter") else 1


@dataclass(frozen=True)
class Link:
    """Latency per message step and seconds per byte over the slowest link of a ring."""

    alpha_s: float
    beta_s_per_byte: float

    @classmethod
    def from_bandwidth(cls, bytes_per_s: float, latency_s: float = 0.0) -> Link:
        """A link from a datasheet or given rate and latency (calibration's fallback when no commbench fit)."""
        return cls(alpha_s=latency_s, beta_s_per_byte=1.0 / bytes_per_s)

    @classmethod
    def from_fit(cls, fit: AlphaBetaFit) -> Link:
        """Undo the ring model on a commbench fit: its beta is bus factor x beta_link, its alpha steps x alpha_link
        (a least-squares intercept below zero is noise around a tiny latency: 0).

        For the inter-node link, fit a commbench run with one rank per node (the node's link, as above).
        """
        if fit.world_size < 2:
            raise ConfigError("a commbench fit on one rank says nothing about a link: run it on 2 ranks or more")
        return cls(
            alpha_s=max(0.0, fit.alpha_s) / _ring_steps(fit.op, fit.world_size),
            beta_s_per_byte=fit.beta_s_per_byte / bus_factor(fit.op, fit.world_size),
        )


def ring_allreduce_s(size_bytes: float, n: int, link: Link) -> float:
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * link.alpha_s + 2 * (n - 1) / n * size_bytes * link.beta_s_per_byte


def allreduce_s(size_bytes: float, devices_per_node: int, nodes: int, intra: Link | None, inter: Link | None) -> float:
    """Hierarchical all-reduce (see the module's docstring); one ring inside a node when nodes == 1."""
    if devices_per_node > 1 and intra is None:
        raise ConfigError(
            "a prediction over several devices in a node needs the intra-node link: give its commbench fit"
        )
    inside = ring_allreduce_s(size_bytes, devices_per_node, intra) if devices_per_node > 1 else 0.0
    if nodes <= 1:
        return inside
    if inter is None:
        raise ConfigError("a prediction over several nodes needs the inter-node link: give its commbench fit")
    return inside + ring_allreduce_s(size_bytes, nodes, inter)


Buckets = list[tuple[int, int]]  # (bucket bytes, how many in a row), in the order they become ready


def ddp_buckets(
    gradient_bytes: int, bucket_bytes: int = DDP_BUCKET_BYTES, first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES
) -> Buckets:
    """Bucket sizes in the order they become ready (bytes, not DDP's parameter boundaries), as runs of equal
    buckets: 10^18 gradient bytes are 4·10^10 buckets, which a list of one entry each would never finish."""
    if bucket_bytes < 1:
        raise ConfigError(f"a DDP bucket holds at least 1 byte, got {bucket_bytes}")
    runs: Buckets = []
    left = gradient_bytes
    if first_bucket_bytes and left > 0:
        runs.append((min(first_bucket_bytes, left), 1))
        left -= runs[-1][0]
    full, rest = divmod(left, bucket_bytes)
    runs += [run for run in ((bucket_bytes, full), (rest, 1 if rest else 0)) if run[1]]
    return runs


def bucket_count(buckets: Buckets) -> int:
    return sum(count for _, count in buckets)


def exposed_allreduce_s(backward_s: float, buckets: Buckets, allreduce: Callable[[int], float]) -> tuple[float, float]:
    """(exposed seconds after the backward pass, total all-reduce seconds) for buckets ready in order during it.

    Within a run of k equal buckets (cost c each, one ready every d seconds from r0 on) the stream, free at
    `done`, ends at max(done + k·c, r0 + d + k·c, r0 + k·d + c): the queue started by the first bucket, or by
    the last (a maximum over linear terms sits at an end), so the time is closed-form in the bucket count."""
    total = sum(size * count for size, count in buckets)
    done = 0.0  # when the stream is free
    ready_bytes = 0
    busy = 0.0
    for size, count in buckets:
        r0 = backward_s * ready_bytes / total
        d = backward_s * size / total
        cost = allreduce(size)
        done = max(done + count * cost, r0 + d + count * cost, r0 + count * d + cost)
        ready_bytes += size * count
        busy += count * cost
    return max(0.0, done - backward_s), busy


@dataclass(frozen=True)
class SingleDeviceRun:
    """What the prediction needs from a 1-device run (its record gives the first two, the model the third)."""

    step_time_s: float
    batch_size: int
    backward_share: float  # of the step time
    gradient_bytes: int
    bucket_bytes: int = DDP_BUCKET_BYTES
    first_bucket_bytes: int = DDP_FIRST_BUCKET_BYTES

    def __post_init__(self) -> None:
        if not 0 < self.backward_share <= 1:
            raise ConfigError(f"backward share is a fraction of the step in (0, 1], got {self.backward_share}")
        if not (0 < self.step_time_s < math.inf) or self.batch_size < 1 or self.gradient_bytes < 0:
            raise ConfigError("step time, batch size and gradient bytes must be positive")
        if self.gradient_bytes > MAX_GRADIENT_BYTES:
            raise ConfigError(f"{self.gradient_bytes} gradient bytes is beyond any model (at most 2^60)")
        if self.bucket_bytes < 1:
            raise ConfigError(f"a DDP bucket holds at least 1 byte, got {self.bucket_bytes}")

    @property
    def throughput(self) -> float:
        return self.batch_size / self.step_time_s


@dataclass(frozen=True)
class Prediction:
    nodes: int
    devices_per_node: int
    step_time_s: float
    throughput: float  # global samples/s
    speedup: float  # against the 1-device run
    comm_s: float  # all-reduce seconds per step, hidden or not
    exposed_s: float  # what the step waits for after its backward pass
    buckets: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def efficiency(self) -> float:
        return self.speedup / self.world_size


def predict_data_parallel(
    run: SingleDeviceRun,
    devices_per_node: int,
    nodes: int = 1,
    intra: Link | None = None,
    inter: Link | None = None,
    overlap: bool = True,
) -> Prediction:
    """DDP at devices_per_node x nodes with the 1-device run's batch per device (see the module's docstring)."""
    if devices_per_node < 1 or nodes < 1:
        raise ConfigError(f"devices per node and nodes must be at least 1, got {devices_per_node} and {nodes}")
    world = devices_per_node * nodes
    if world == 1:
        return Prediction(1, 1, run.step_time_s, run.throughput, 1.0, 0.0, 0.0, 0)
    buckets = ddp_buckets(run.gradient_bytes, run.bucket_bytes, run.first_bucket_bytes)
    exposed, busy = exposed_allreduce_s(
        run.backward_share * run.step_time_s,
        buckets,
        lambda size: allreduce_s(size, devices_per_node, nodes, intra, inter),
    )
    if not overlap:
        exposed = busy
    step = run.step_time_s + exposed
    throughput = world * run.batch_size / step
    return Prediction(
        nodes, devices_per_node, step, throughput, throughput / run.throughput, busy, exposed, bucket_count(buckets)
    )


def group_span(stride: int, size: int, devices_per_node: int) -> tuple[int, int]:
    """(ranks per node, nodes) of a process group of `size` ranks `stride` apart, ranks filling nodes in order."""
    per_node = max(1, min(size, devices_per_node // stride))
    return per_node, math.ceil(size / per_node)


@dataclass(frozen=True)
class GptSingleDevice:
    """A 1-device GPT run, per micro-batch: forward + backward of the whole model (optimizer folded in, i.e. the
    step time over the micro-batches per step), and the shape that sizes its activations."""

    microbatch_time_s: float
    backward_share: float
    gradient_bytes: int
    layers: int
    hidden: int
    seq_length: int
    micro_batch: int
    activation_bytes: int = 2  # bf16/fp16 activations

    @property
    def activation_message_bytes(self) -> int:
        """B·s·h activations: what a TP all-reduce or a pipeline send carries per micro-batch."""
        return self.micro_batch * self.seq_length * self.hidden * self.activation_bytes


@dataclass(frozen=True)
class LayoutPrediction:
    dp: int
    tp: int
    pp: int
    micro_batches: int  # per data-parallel rank per step
    step_time_s: float
    throughput: float  # samples/s
    speedup: float  # against one device running the same micro-batches
    bubble_fraction: float
    tp_comm_s: float  # per micro-batch per stage
    p2p_s: float  # per micro-batch per stage boundary, forward and backward
    dp_exposed_s: float


def predict_gpt_layout(
    run: GptSingleDevice,
    dp: int,
    tp: int,
    pp: int,
    micro_batches: int,
    devices_per_node: int,
    intra: Link,
    inter: Link | None = None,
) -> LayoutPrediction:
    """A dp x pp x tp mesh (tp innermost, as the GPT workload builds it), assuming:

    - compute splits evenly: a micro-batch takes microbatch_time_s / (tp·pp) on each device;
    - TP all-reduces B·s·h activations 2 times per layer forward and 2 backward (Megatron's f/g), not overlapped;
    - PP sends B·s·h activations forward and their gradients back at each stage boundary, not overlapped, and the
      slowest boundary paces the pipeline: a step is (m + pp - 1) micro-batch slots, bubble (pp-1)/(m+pp-1)
      (GPipe and 1F1B alike);
    - DP all-reduces each device's gradient shard (gradient_bytes / (tp·pp)) in DDP buckets during the last
      micro-batch's backward, as in `predict_data_parallel`.
    A group whose ranks sit on several nodes uses the inter-node link (hierarchically for DP and TP).
    """
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("micro-batches", micro_batches)):
        if value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}")
    if run.layers % pp:
        raise ConfigError(f"{run.layers} layers do not split into {pp} pipeline stages: pick pp dividing the layers")
    if run.hidden % tp:
        raise ConfigError(f"hidden size {run.hidden} does not split over tp={tp}: pick tp dividing it")
    message = run.activation_message_bytes
    tp_per_node, tp_nodes = group_span(1, tp, devices_per_node)
    tp_comm = 4 * (run.layers // pp) * allreduce_s(message, tp_per_node, tp_nodes, intra, inter)
    _, pp_nodes = group_span(tp, pp, devices_per_node)
    pp_link = inter if pp_nodes > 1 else intra
    if pp_link is None:
        raise ConfigError("a pipeline over several nodes needs the inter-node link: give its commbench fit")
    p2p = 2 * (pp_link.alpha_s + message * pp_link.beta_s_per_byte) if pp > 1 else 0.0
    slot = run.microbatch_time_s / (tp * pp) + tp_comm + p2p
    pipeline = (micro_batches + pp - 1) * slot
    dp_per_node, dp_nodes = group_span(tp * pp, dp, devices_per_node)
    exposed, _ = exposed_allreduce_s(
        run.backward_share * slot,
        ddp_buckets(run.gradient_bytes // (tp * pp)),
        lambda size: allreduce_s(size, dp_per_node, dp_nodes, intra, inter),
    ) if dp > 1 else (0.0, 0.0)  # fmt: skip
    step = pipeline + exposed
    throughput = dp * micro_batches * run.micro_batch / step
    return LayoutPrediction(
        dp=dp,
        tp=tp,
        pp=pp,
        micro_batches=micro_batches,
        step_time_s=step,
        throughput=throughput,
        speedup=throughput / (run.micro_batch / run.microbatch_time_s),
        bubble_fraction=(pp - 1) / (micro_batches + pp - 1),
        tp_comm_s=tp_comm,
        p2p_s=p2p,
        dp_exposed_s=exposed,
    )
