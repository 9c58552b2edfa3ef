"""A mixture-of-experts training step at any layout: the dense part (attention, norms, router, shared experts, the
dense first blocks, embedding and output) is the Llama model's (workloads/llama/predict_model.py, called whole),
the routed experts are added here. Everything is per device and per step; docs/scaling.md holds the checks.

The expert mesh is Megatron's with expert tensor parallelism 1 (and torchtitan's with etp 1): the ep ranks of a
group are neighbours along tp x cp x dp_shard (tp innermost), each holds num_experts / ep experts whole, and the
(tp x cp x dp) / ep groups of ep ranks (expert data parallelism, edp) shard and reduce the experts' state.

Routed experts, per MoE block and micro-batch on one rank: its tokens (b·s / (cp·tp) under sequence parallelism)
each pick top_k experts. Dispatch and combine are all-to-alls of top_k·h values per token (16-bit, fp32 in fp32),
forward and backward (four, six under full recomputation); of a rank's pairs (ep_node - 1)/ep stay on the NVLink
domain (ep_node = the group's ranks inside one domain: 8 on HGX, 72 on NVL72) and (ep - ep_node)/ep cross
InfiniBand through the rank's own NIC, the two at once (NCCL's and DeepEP's all-to-all post every peer together);
the busiest rank receives its measured rank imbalance times the mean (`rank_imbalance`, else the busiest expert's
`imbalance`). The experts' grouped GEMMs do 18·h·f per token-expert pair (forward and backward of three matrices)
for the busiest rank's pairs, the mean times that imbalance (capped at the
capacity factor, whose excess is dropped), at the device's rate times the stack's grouped-GEMM share, plus the
local experts' weights read once forward and twice backward at the memory bandwidth: the roofline (Williams,
Waterman and Patterson 2009) is why a grouped GEMM's efficiency falls with the tokens each expert gets (below
about rate / bandwidth, ~170 tokens on an H100, it is bound by the weights). A share of the all-to-all hides
behind compute where the stack overlaps it (Megatron's 1F1B A2A overlap of one micro-batch's dispatch with
another's experts; DeepEP's and DualPipe's). Each MoE block launches 9 GEMMs per local expert and MOE_KERNELS
more per micro-batch at a fitted time each (host-bound where the experts are small). Host work the
rates do not hold, where it is measured (`Experts.host_s`), follows the device's work on a CPU (one thread) and
bounds the step from below on a GPU (the host runs ahead). The expert gradients reduce
(fp32, or 16-bit where the run reduces in bf16) and the weights gather over edp once per step (`_expert_dp_s`;
under FSDP2 each micro-batch, with its copies around each, over one rank too), AdamW steps the local expert shard
(and dlperf's shared experts, unsplit under tp, are sharded and stepped as the dense part's), and the experts' time
joins each pipeline slot (so the bubble grows with it).

Memory: the expert state (fp32 values, gradients, two moments: 16 bytes per parameter) sharded over edp (Megatron's
distributed optimizer: the fp32 values and moments, 12 bytes, over edp; the 16-bit values and the gradients, fp32 or
16-bit as the run reduces them, whole), their unsharded 16-bit values and gradients while a stage runs (as the
dense part's FSDP buffers), and per token-expert pair the dispatched input, SwiGLU's two projections, its output
and the experts' output kept for backward (none under full recomputation; Megatron weighs the routing scores into
the activation, keeps no experts' output, and under float8 keeps the GEMM inputs quantized), for as many
micro-batches as the schedule holds in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from dlperf.predict.setting import Device, Network, Training
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.llama.predict_model import (
    OPTIMIZER_BYTES_PER_PARAM,
    SCHEDULE_BUBBLE,
    AttentionKept,
    ModelShape,
    _in_flight,
    _peak,
    fsdp_copies_s,
    predict_llama,
)
from dlperf.workloads.moe.config import MoEConfig, parameter_counts

STATE_BYTES = 16  # fp32 value, gradient and AdamW's two moments per parameter
MOE_KERNELS = 60  # an MoE block's kernels beside the experts' GEMMs, forward and backward (assumed, not counted)


@dataclass(frozen=True)
class MoEShape:
    """What the prediction needs of an MoE model: the dense part as a Llama shape and the routed experts."""

    dense: ModelShape  # everything but the routed experts; its block holds attention, norms, router, shared experts
    moe_layers: int
    experts: int
    top_k: int
    expert_ffn: int
    total: int
    active: int
    flops_per_token: int  # 6 x active non-embedding parameters + the attention scores' 12·L·H·Q·T (PaLM's count)
    flops_per_token_causal: int  # the attention term halved (MaxText's and Megatron-Bridge's count)
    shared_experts: int = 0  # of expert_ffn each, in the dense part's feed-forward

    @property
    def expert_params(self) -> int:
        """One routed expert's SwiGLU."""
        return 3 * self.dense.hidden * self.expert_ffn

    def without_shared(self) -> ModelShape:
        """The dense part less the shared experts (dlperf runs them whole on every tp rank, as its routed ones)."""
        params = self.moe_layers * self.shared_experts * self.expert_params
        ffn = self.dense.ffn - self.shared_experts * self.expert_ffn
        return replace(self.dense, ffn=ffn, params=self.dense.params - params,
                       flops_per_token=self.dense.flops_per_token - 6 * params)  # fmt: skip


@dataclass(frozen=True)
class Experts:
    """How the routed experts run: the stack's and the router's figures."""

    imbalance: float = 1.0  # the busiest expert's tokens over the mean (1.0: force-balanced)
    capacity_factor: float | None = None  # None: dropless
    grouped_gemm_share: float = 1.0  # of the dense matmuls' achieved rate the grouped GEMMs reach at large sizes
    a2a_hidden: float = 0.0  # of the all-to-all hidden behind compute (Megatron's 1F1B A2A overlap, DeepEP)
    launch_s: float = 0.0  # per kernel an MoE block launches (host-bound at small sizes)
    grad_bytes: int = 4  # of an expert gradient in its buffer and reduction: fp32, or 2 where the run reduces in
    # bf16 (Megatron's grad_reduce_in_fp32 False, which Megatron-Bridge's MoE performance recipes set)
    tp_folded: bool = True  # ep folded over tp too, each tp rank routing its sequence slice (Megatron's and
    # torchtitan's expert-TP 1); False: dlperf's MoE workload, every tp rank running its ep group's experts on the
    # whole sequence (their work, all-to-all and activations tp times; their state replicated over tp)
    host_s: float = 0.0  # the stack's host work per step that no rate holds (dispatch, hooks, unfused optimizer
    # launches), measured (benchmarks/predict_moe_cpu.py: the layout's floor at tiny widths less one rank's)
    host_serial: bool = False  # True on a CPU: host and device are one thread, the host's work adds to the step;
    # False on a GPU: the host runs ahead of the device, the step at least its host work
    rank_imbalance: float | None = None  # the busiest ep rank's token-expert pairs over the mean rank's, measured
    # (a record's moe.ep_imbalance): a rank's experts run its pairs' sum; None: the busiest expert's, as if alone


@dataclass(frozen=True)
class MoEPrediction:
    step_s: float
    tokens_per_s_per_device: float
    mfu: float  # PaLM's count (active experts, attention whole) over the run precision's datasheet peak
    mfu_causal: float  # the attention term halved, as Megatron-Bridge's tables count
    time: dict[str, float]  # seconds per step by part
    memory: dict[str, float]  # bytes per device by part, the worst stage
    memory_bytes: float
    fits: bool
    device_memory_bytes: float
    tokens_per_expert: float  # of one local expert per micro-batch and block: what its grouped GEMM sees
    dropped_share: float  # of the busiest expert's tokens, past the capacity factor


def moe_shape(config: MoEConfig, up_projections_recomputed: bool = False) -> MoEShape:
    """`up_projections_recomputed`: MLA's per-head queries, keys and values recomputed in backward, as Megatron's
    recompute_modules mla_up_proj and DeepSeek-V3's training (its report's section 3.2.3) do."""
    counts = parameter_counts(config)
    h, moe_layers = config.hidden_size, config.num_layers - config.num_dense_layers
    routed = moe_layers * config.num_experts * 3 * h * config.moe_ffn_hidden_size
    width = _attention_width(config)
    attention_flops = 12 * config.num_layers * width * config.seq_length
    kv = config.num_kv_heads * config.head_dim if config.attention == "gqa" else config.kv_lora_rank
    dense = ModelShape(
        layers=config.num_layers, hidden=h, heads=h, kv_heads=kv,  # heads = hidden: kv_width is kv_heads
        ffn=config.num_shared_experts * config.moe_ffn_hidden_size
        + config.num_dense_layers * config.ffn_hidden_size // config.num_layers,
        vocab=config.vocab_size, seq=config.seq_length, params=counts.total - routed, embedding=counts.embedding,
        flops_per_token=6 * (counts.active - counts.embedding) + attention_flops, attention_width=width,
        attention_kept=None if config.attention == "gqa" else mla_kept(config, up_projections_recomputed),
    )  # fmt: skip
    base = 6 * (counts.active - counts.embedding)
    return MoEShape(dense, moe_layers, config.num_experts, config.top_k, config.moe_ffn_hidden_size, counts.total,
                    counts.active, base + attention_flops, base + attention_flops // 2,
                    config.num_shared_experts)  # fmt: skip


def _attention_width(config: MoEConfig) -> int:
    """H·Q of the score FLOPs: GQA's heads x head size; MLA's heads x the mean of its query/key and value sizes."""
    if config.attention == "gqa":
        return config.num_heads * config.head_dim
    return config.num_heads * (config.qk_nope_head_dim + config.qk_rope_head_dim + config.v_head_dim) // 2


def mla_kept(config: MoEConfig, up_projections_recomputed: bool = False) -> AttentionKept:
    """MLA's activations per token (DeepSeek-V3's shapes). dlperf's keeps each head's query and key (qk_nope +
    qk_rope wide), its value zero-padded to that width and the attention's output at it (the fused kernels want one
    head size), the output cut to v_head_dim for wo; and, from the gathered norm output, whole on each tp rank, the
    latent with the rotary key (kv_lora_rank + qk_rope_head_dim), kv_norm's normalised input and output and the
    query's rank with its norm's two (torchtitan's keeps as much at DeepSeek-V3's head sizes: values unpadded in
    their projection, the output twice). Transformer Engine keeps the query and key, the value and the output, and
    each down projection's and norm's outputs, all sequence-sharded (Megatron-Core's MLASelfAttention); with the
    up projections recomputed, of the per-head tensors the output alone."""
    heads, qk, v = config.num_heads, config.qk_nope_head_dim + config.qk_rope_head_dim, config.v_head_dim
    kv, q, down = config.kv_lora_rank, config.q_lora_rank, config.kv_lora_rank + config.qk_rope_head_dim
    te_heads = heads * v if up_projections_recomputed else heads * (2 * qk + 2 * v)
    return AttentionKept(heads * (4 * qk + v), down + 2 * kv + 3 * q, te_heads + down + kv + 2 * q)


def expert_group(ep: int, per_node: int) -> tuple[int, int]:
    """(the ep group's ranks inside one NVLink domain, its domains): neighbouring ranks, tp innermost."""
    inside = min(ep, per_node)
    return inside, math.ceil(ep / inside)


def a2a_bytes_per_token(shape: MoEShape, ep: int, per_node: int, value_bytes: int) -> tuple[float, float]:
    """(bytes one token sends over NVLink, over InfiniBand) in one dispatch: top_k copies of h values of
    `value_bytes` (the activations': 2, or 4 in fp32), spread evenly over the ep ranks; those to itself move
    nothing."""
    inside, _ = expert_group(ep, per_node)
    pair = shape.dense.hidden * value_bytes
    return shape.top_k * pair * (inside - 1) / ep, shape.top_k * pair * (ep - inside) / ep


def expert_params_per_rank(shape: MoEShape, layers: int, ep: int) -> float:
    """The routed experts' parameters a rank holds whole on a stage of `layers` MoE blocks."""
    return layers * shape.experts / ep * shape.expert_params


def expert_state_bytes(shape: MoEShape, layers: int, ep: int, edp: int) -> float:
    """The expert state a rank keeps between steps: 16 bytes per parameter, its 1/edp shard of the local experts."""
    return STATE_BYTES * expert_params_per_rank(shape, layers, ep) / edp


def predict_moe(
    shape: MoEShape, layout: LlamaLayout, ep: int, experts: Experts, training: Training, device: Device,
    net: Network,
) -> MoEPrediction:  # fmt: skip
    """Step time, its parts, MFU and memory per device (the model in the module's docstring)."""
    shared = 0 if experts.tp_folded or layout.tp == 1 else shape.shared_experts  # run as routed ones, unsplit
    dense = predict_llama(shape.without_shared() if shared else shape.dense, layout, training, device, net)
    pp, v, m = layout.pp, layout.stages_per_rank, layout.accumulation_steps
    layers = min(math.ceil(shape.dense.layers / pp), shape.moe_layers)  # the last stage's MoE blocks
    tp = layout.tp if experts.tp_folded else 1  # the tp ranks that split the experts' tokens and state
    edp = tp * layout.cp * layout.dp_shard * layout.dp_replicate // ep
    tokens = layout.micro_batch_size * shape.dense.seq / (layout.cp * tp)  # this rank's, sequence-parallel
    paced, expert_paced, received = paces(experts)
    grouped_s, per_expert = _grouped_gemm_s(shape, training, device, layers, tokens, (ep, shared), experts, paced)
    a2a_s = _a2a_s(shape, training, net, layers, tokens, ep) * received * (1 - experts.a2a_hidden)
    launch_s = layers * launches(shape, ep) * experts.launch_s
    slot = grouped_s + a2a_s + launch_s
    bubble_s = SCHEDULE_BUBBLE[layout.pp_schedule] * (pp - 1) / v * slot if pp > 1 else 0.0
    local = expert_params_per_rank(shape, layers, ep)
    gathers = 2 * m if pp == 1 and not training.distributed_optimizer else 1  # FSDP2's forward and backward each
    micro_s = dense.time["compute"] / m + grouped_s
    fsdp_s = _expert_dp_s(training, net, device, (local, experts.grad_bytes), (ep * layout.tp // tp, edp, gathers),
                          micro_s, layers, ep > 1)  # fmt: skip
    optimizer_s = OPTIMIZER_BYTES_PER_PARAM * local / edp / device.memory_bytes_per_s
    if shared:  # out of the dense part, yet FSDP2's with it (over dp_shard x cp, tp apart), whole on each tp rank
        unsplit, shards = layers * shared * shape.expert_params, layout.dp_shard * layout.cp
        fsdp_s += _expert_dp_s(training, net, device, (unsplit, 4), (layout.tp, shards * layout.dp_replicate,
                               gathers), micro_s, layers, False)  # fmt: skip
        optimizer_s += OPTIMIZER_BYTES_PER_PARAM * unsplit / shards / device.memory_bytes_per_s
    time = {**dense.time, "experts": m * grouped_s, "all_to_all": m * a2a_s, "launches": m * launch_s}
    time["pipeline_bubble"] += bubble_s
    time["fsdp_dp"] += fsdp_s
    time["optimizer"] += optimizer_s
    device_s = dense.step_s + m * slot + bubble_s + fsdp_s + optimizer_s
    step = with_host(device_s, experts)
    time["host"] = step - device_s
    memory = _memory(shape, layout, training, dense.memory, layers, tokens, (ep, edp), (paced, shared),
                     experts.grad_bytes)  # fmt: skip
    total = _peak(memory, m)
    tokens_per_s = layout.global_batch_size * shape.dense.seq / step / layout.world_size
    peak = device.peak_tflops * 1e12
    dropped = 1 - expert_paced / experts.imbalance
    return MoEPrediction(step, tokens_per_s, tokens_per_s * shape.flops_per_token / peak,
                         tokens_per_s * shape.flops_per_token_causal / peak, time, memory, total,
                         total <= device.memory_bytes, device.memory_bytes, per_expert, dropped)  # fmt: skip


def paces(experts: Experts) -> tuple[float, float, float]:
    """(the busiest rank's pairs over the mean, after the capacity factor's drops; the busiest expert's, after
    them; the busiest rank's received tokens over the mean, before them). A rank's grouped GEMMs, all-to-all and
    kept activations follow the sum of its local experts' tokens: the measured rank imbalance where there is one,
    never above its busiest expert's; else the busiest expert's."""
    expert = min(experts.imbalance, experts.capacity_factor or math.inf)
    if experts.rank_imbalance is None:
        return expert, expert, experts.imbalance
    return min(experts.rank_imbalance, expert), expert, experts.rank_imbalance


def with_host(device_s: float, experts: Experts) -> float:
    """The step with the stack's host work: after the device's on a CPU, under it on a GPU unless it is longer."""
    return device_s + experts.host_s if experts.host_serial else max(device_s, experts.host_s)


def _grouped_gemm_s(
    shape: MoEShape, training: Training, device: Device, layers: int, tokens: float, group: tuple[int, int],
    experts: Experts, paced: float,
) -> tuple[float, float]:  # fmt: skip
    """(the busiest rank's expert seconds per micro-batch, the tokens each local expert gets): FLOPs at the grouped
    share of the matmul rate, plus the local weights read three times (forward, and backward's two GEMMs); `group`:
    (ep, the shared experts every token passes on this rank besides, where they are not in the dense part)."""
    ep, shared = group
    per_expert = tokens * shape.top_k * ep / shape.experts
    pairs = tokens * (shape.top_k * paced + shared)
    flops = layers * pairs * 6 * shape.expert_params * (4 / 3 if training.checkpointing == "full" else 1)
    rate = (device.fp8_rate if training.float8 else device.rate) * experts.grouped_gemm_share
    weight_bytes = 4 if training.precision == "fp32" else 1 if training.float8 else 2
    reads = 3 * layers * (shape.experts / ep + shared) * shape.expert_params * weight_bytes / device.memory_bytes_per_s
    return flops / rate + reads, per_expert


def launches(shape: MoEShape, ep: int) -> int:
    """Kernels one MoE block launches per micro-batch, forward and backward: three GEMMs per local expert each for
    the forward, the input's gradient and the weights' (Transformer Engine's grouped linear runs one cuBLAS GEMM per
    expert), and MOE_KERNELS for the router, its top-k, the permutations and the all-to-alls."""
    return 9 * shape.experts // ep + MOE_KERNELS


def _expert_dp_s(
    training: Training, net: Network, device: Device, experts: tuple[float, int], group: tuple[int, int, int],
    micro_s: float, layers: int, wrapped: bool,
) -> float:  # fmt: skip
    """The gradients of `experts` (local parameters, bytes per gradient) reduce-scattered and their weights
    all-gathered (16-bit, 8-bit under float8; fp32 in fp32) over the edp ranks `stride` apart (`group`: stride, edp,
    gathers per step), the reduction bucket by bucket during the last micro-batch's backward, each gather during a
    forward (`micro_s`: one micro-batch's compute, a third of it forward): once per step as Megatron's distributed
    optimizer runs them, forward and backward each micro-batch as FSDP2 does, with FSDP2's copies around each (the
    dense part's rule), over one rank too where it holds them (`wrapped`: dlperf's experts under ep). Each is
    hidden but for its last block's share, except where nothing overlaps (gloo on the computing cores)."""
    stride, edp, gathers = group
    fsdp2 = not training.distributed_optimizer and (edp > 1 or wrapped)
    if edp <= 1 and not fsdp2:
        return 0.0
    local, grad_bytes = experts
    weight_bytes = 4 if training.precision == "fp32" else 1 if training.float8 else 2
    copies = fsdp_copies_s(local, edp, device) if fsdp2 else 0.0
    reduce = net.collective_s("reduce_scatter", local * grad_bytes, edp, stride) + copies * grad_bytes
    gather = net.collective_s("all_gather", local * weight_bytes, edp, stride) + copies * weight_bytes
    if not training.overlap:
        return reduce + gathers * gather
    hidden = max(0.0, reduce - micro_s * 2 / 3) + gathers * max(0.0, gather - micro_s / 3)
    return hidden + (reduce + gathers * gather) / max(layers, 1)


def _a2a_s(shape: MoEShape, training: Training, net: Network, layers: int, tokens: float, ep: int) -> float:
    """The mean rank's dispatch and combine all-to-alls per micro-batch: each one latency (every peer's send posted
    together) and its bytes on NVLink and InfiniBand at once."""
    if ep <= 1:
        return 0.0
    nvlink, infiniband = a2a_bytes_per_token(shape, ep, net.devices_per_node, training.act_bytes)
    inside, domains = expert_group(ep, net.devices_per_node)
    intra, inter = net.intra_ops.get("all_to_all", net.intra), net.inter_ops.get("all_to_all", net.inter)
    one = max(intra.alpha_s * (inside > 1) + tokens * nvlink * intra.beta_s_per_byte,
              inter.alpha_s * (domains > 1) + tokens * infiniband * inter.beta_s_per_byte)  # fmt: skip
    count = 6 if training.checkpointing == "full" else 4  # dispatch and combine, forward, backward (recompute)
    return layers * count * one


def kept_bytes_per_pair(shape: MoEShape, training: Training) -> float:
    """Bytes one token-expert pair keeps for backward: the dispatched input (h) and the SwiGLU output (f;
    recomputed under selective, Megatron's moe_act) for their GEMMs' weight gradients, which Transformer Engine
    (Megatron's) keeps quantized under float8, a byte each; SwiGLU's two projections (2f); the experts' output (h)
    for the routing scores' gradient, except where Megatron's grouped MLP weighs the scores into the activation."""
    if training.checkpointing == "full":
        return 0.0
    h, f = shape.dense.hidden, shape.expert_ffn
    act, megatron = training.act_bytes, training.distributed_optimizer  # the switch `--stack megatron` sets
    inputs = (h + f if training.checkpointing == "none" else h) * (1 if training.float8 and megatron else act)
    return inputs + (2 * f + (0 if megatron else h)) * act


def _memory(
    shape: MoEShape, layout: LlamaLayout, training: Training, dense: dict[str, float], layers: int, tokens: float,
    group: tuple[int, int], picks: tuple[float, int], grad_bytes: int,
) -> dict[str, float]:  # fmt: skip
    """The dense part's bytes by part with the experts' added to each; `group`: (ep, edp), `picks`: (the busiest
    expert's pace, the shared experts run as routed ones besides: their state sharded with the dense part's)."""
    (ep, edp), (paced, shared) = group, picks
    local = expert_params_per_rank(shape, layers, ep)
    compute_bytes = 4 if training.precision == "fp32" else 2
    sharded = local / edp
    if not training.distributed_optimizer and layout.dp_shard * layout.cp * layout.dp_replicate == 1:
        unsharded = 0.0  # no FSDP where nothing averages gradients (the dense part's rule)
    elif training.distributed_optimizer or layout.pp > 1:  # whole while the stage runs (Megatron's always)
        unsharded = local * (compute_bytes + grad_bytes)
    else:  # FSDP2: two blocks', and the gradients accumulating whole over micro-batches
        unsharded = 2 * local / max(layers, 1) * (compute_bytes + 4)
        unsharded += local * compute_bytes if layout.accumulation_steps > 1 else 0.0
    # the first stage holds the most micro-batches in flight, but the dense first blocks are among its blocks
    first = max(0, math.ceil(shape.dense.layers / layout.pp) - (shape.dense.layers - shape.moe_layers))
    in_flight = max(_in_flight(layout, first, True), _in_flight(layout, layers, False))
    activations = tokens * (shape.top_k * paced + shared) * kept_bytes_per_pair(shape, training) * in_flight
    parts = dict(dense)
    # Megatron's fp32 master weights live in the optimizer's shard beside the moments, its gradients only whole
    parts["parameters"] += 0.0 if training.distributed_optimizer else 4 * sharded
    parts["gradients"] += 0.0 if training.distributed_optimizer else 4 * sharded
    parts["optimizer"] += (12 if training.distributed_optimizer else 8) * sharded
    parts["optimizer"] += STATE_BYTES * layers * shared * shape.expert_params / (layout.dp_shard * layout.cp)
    parts["fsdp_buffers"] += unsharded
    parts["activations"] += activations
    return parts
