"""A Llama training step at any layout, on devices it has never run on: step time and its parts, MFU, memory.

The caller gives the model's shape and FLOP count (`model_shape`: the workload's own counts), a layout that
already passed the workload's rules (`layout_of`), the device (peak, achieved efficiency, memory) and the links.
Everything is per device and per step. The model, stated once (see docs/scaling.md for its checks):

Compute. A micro-batch on one rank does the records' FLOPs (6N + 12·L·H·Q·T per token) for its layers, its share of
the sequence (1/cp) and of the matrices (1/tp); the last pipeline stage adds the output layer (6·V·h per token),
which makes it the slowest. Recomputation adds forward FLOPs (a third of fwd+bwd): all of them under full
checkpointing, `recompute_mm_share` of the block matmuls' under selective. The block linears run at the fp8 peak
under float8, the rest at the run precision's; both at the device's achieved `efficiency` (its own for fp8).
Causal flash attention does half the counted score FLOPs; counting them all at the matmuls' efficiency is the
assumption that it runs at half their rate. The optimizer reads and writes 28 bytes per local parameter (AdamW on
fp32 values, moments and gradients) at the memory bandwidth.

Communication. A collective over n ranks, k of them per node, is a ring inside the node (the scale-up link) then
a ring across the n/k nodes carrying 1/k of the bytes through each device's own NIC; alpha per ring step, beta per
byte. TP with sequence parallelism: the logits gathered whole for the loss (none under torchtitan's loss parallelism);
per block 2 all-gathers and 2 reduce-scatters of the micro-batch's activations
(b·s/cp·h, 16-bit) forward, as many backward, again in recomputation (only the all-gathers under selective, whose
policy keeps the reduce-scatters' outputs); exposed, half of them hidden under the matmuls by async TP (its
decomposed matmuls run slower: torchtitan's published async gains, 4 to 16 %, are half of what hiding all would
give in this model). FSDP
over dp_shard x cp: each micro-batch all-gathers the rank's parameters (16-bit, or 8-bit weights under float8)
forward and again backward; the last micro-batch reduce-scatters the fp32 gradients (dlperf syncs gradients only
there, as Megatron does; earlier ones accumulate unsharded) and HSDP then all-reduces the gradient shard across
replicas. They overlap compute (prefetch), so what is exposed is the first layer's gather, the last layer's
reduction and whatever the communication exceeds the forward or backward compute by; each collective's time
includes FSDP2's copies into and out of its buffers (a read and a write of the shard and of the unsharded tensors)
at the memory bandwidth. Under PP the stage gathers
once and reduces once per step (torchtitan keeps parameters unsharded between micro-batches), the reduction behind
the last micro-batch's backward. CP: ring attention passes the key/value chunk (repeated to the query heads, as
dlperf and torchtitan give it to attention; at the key/value heads under Megatron's Transformer Engine) cp-1 times
per block forward and key/value plus their gradients backward, each hidden behind one chunk's attention (Llama 3's
all-gather of the keys and values at their heads, `cp_all_gather`, moves as many bytes, hidden behind nothing).
PP: each micro-batch sends activations forward and gradients back at each of the rank's stage boundaries, not
hidden. The bubble: the last stage (the slowest) works its m micro-batches while the others fill the pipeline
before and drain it after, pp-1 micro-batch slots of a stage without the output layer for gpipe and 1f1b, (pp-1)/v
interleaved over v stages per rank, a third of that for the zero-bubble schedules (ZB-H1's bubble, Qi et al. 2023,
the assumption for interleaved-zb and zbv alike).

Memory (allocated bytes, the worst stage: the first holds the most activations, the last the logits, zbv's V puts
both on one rank), at the largest of three moments: the loss, the end of backward, the optimizer step (`_peak`).
Parameters, gradients (fp32) and AdamW's two moments as FSDP shards them (16 bytes per local parameter; with one
micro-batch per step the gradients, set to None between steps, are not there at the loss); an unfused AdamW's
temporaries at the step (two of the largest local parameter, in fp32); FSDP's root (embedding, final norm, output,
which dlperf shards as one unit) gathered again for backward with its unsharded gradients at the end of it;
communication buffers wherever FSDP2 averages gradients (HSDP with one shard too, as dlperf runs data parallelism):
two blocks unsharded in the compute dtype plus their fp32 gradients (prefetch and reduction), under PP the whole
stage's unsharded parameters and gradients, and with several micro-batches the unsharded gradients they accumulate;
autocast's 16-bit weight copies where no FSDP casts them; float8 weight copies of two blocks. Activations per block
and token, counted from the tensors autograd keeps in this model (dlperf's and torchtitan's Llama): without
checkpointing (10h + kv + 4f)/tp + 2h (the norms' outputs are all-gathered whole for the column-parallel matmuls;
Transformer Engine's fused layers, Megatron's, keep (6h + 2kv + 3f)/tp under sequence parallelism, Korthikanti et
al. 2022's count for a SwiGLU block without dropout, and recompute nothing more under selective with flash; an
attention other than GQA, MLA, gives its own count for the 4h + kv and 2h + 2kv of q, k, v and output: `AttentionKept`);
selective the block input and attention output (2h/tp) and the matmul outputs it keeps (the share not recomputed of
(h + 2kv + 2f)/tp + 2h, the row-parallel ones whole before their reduce-scatter, whose 2h/tp outputs are kept too);
full h/tp; plus one block's whole set while it is recomputed, times the layers and micro-batches in flight (all of
the rank's layers for one micro-batch; on the first stage under 1F1B pp micro-batches, interleaved torch's warm-up
(`_in_flight`), GPipe all m, on the last stage too). The logits at the last stage (under GPipe the fp32 log-softmax
of the m-1 micro-batches before the last too; whole on every TP rank unless the loss is vocabulary-parallel), at the
loss's peak: the 16-bit logits, the fp32 log-softmax autograd keeps and its gradient (the fp32 copy it is computed
from is freed first): 10 bytes per vocabulary entry and token; in fp32 logits, log-softmax and gradient, 12.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dlperf.predict.setting import Device, Network, Training
from dlperf.workloads.llama import flops_per_token
from dlperf.workloads.llama.config import LlamaConfig, parameter_counts
from dlperf.workloads.llama.layout import LlamaLayout

OPTIMIZER_BYTES_PER_PARAM = 28  # AdamW: reads value, gradient, 2 moments (fp32), writes value and moments
LOGIT_BYTES = {2: 10, 4: 12}  # per vocabulary entry and token, by activation bytes (see the docstring)
KEPT_LOGIT_BYTES = 4  # per entry and token of a micro-batch whose backward has not begun: the fp32 log-softmax
ASYNC_TP_HIDDEN = 0.5  # of the TP collectives async TP hides (torchtitan's published gains: 4 to 16 %)
SCHEDULE_BUBBLE = {"gpipe": 1.0, "1f1b": 1.0, "interleaved-1f1b": 1.0, "interleaved-zb": 1 / 3, "zbv": 1 / 3}


@dataclass(frozen=True)
class AttentionKept:
    """Elements per token an attention other than GQA (MLA) keeps for backward in place of GQA's q, k, v and output
    (4h + kv in dlperf's and torchtitan's count, 2h + 2kv in Transformer Engine's), by stack."""

    heads: float  # dlperf's and torchtitan's per-head tensors, sharded over tp
    latent: float  # theirs computed from the gathered norm output: whole on every tp rank
    te: float  # Transformer Engine's (Megatron's), all sharded under sequence parallelism


@dataclass(frozen=True)
class ModelShape:
    """A Llama's dimensions and counts as the workload computes them (parameter_counts, flops_per_token)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    params: int
    embedding: int  # the token embedding's parameters; the untied output layer holds as many
    flops_per_token: int  # the records' MFU count
    attention_width: int = 0  # H·Q of the score FLOPs where it is not `hidden` (MLA's (qk + v) / 2 per head)
    attention_kept: AttentionKept | None = None  # what an attention other than GQA keeps for backward

    @property
    def kv_width(self) -> int:
        return self.kv_heads * (self.hidden // self.heads)

    @property
    def block_params(self) -> int:
        return (self.params - 2 * self.embedding - self.hidden) // self.layers


def model_shape(config: LlamaConfig) -> ModelShape:
    total, embedding = parameter_counts(config)
    return ModelShape(config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads,
                      config.ffn_hidden_size, config.vocab_size, config.seq_length, total, embedding,
                      flops_per_token(config))  # fmt: skip


@dataclass(frozen=True)
class LlamaPrediction:
    step_s: float
    tokens_per_s_per_device: float
    mfu: float  # the records' FLOPs over the run precision's datasheet peak
    time: dict[str, float]  # seconds per step: compute, tp, fsdp, pipeline_bubble, pipeline_p2p, cp, dp, optimizer
    memory: dict[str, float]  # bytes per device, the worst stage
    memory_bytes: float
    fits: bool
    device_memory_bytes: float


def _stage_params(shape: ModelShape, layers: int, first: bool, last: bool) -> int:
    return layers * shape.block_params + first * shape.embedding + last * (shape.embedding + shape.hidden)


def _activations_per_token(shape: ModelShape, tp: int, training: Training) -> tuple[float, float]:
    """(elements kept per block and token, elements of one block's whole set while it is recomputed)."""
    h, kv, f, other = shape.hidden, shape.kv_width, shape.ffn, shape.attention_kept
    if training.te_layers:  # each norm's input and output, q/k/v, attention's output, SwiGLU's input and output
        attention = other.te if other else 2 * h + 2 * kv
        whole = (4 * h + attention + 3 * f) / tp  # all sharded: the gathered norm outputs are gathered again backward
        return (h / tp, whole) if training.checkpointing == "full" else (whole, 0.0)  # flash: selective keeps all
    heads, latent = (other.heads, other.latent) if other else (4 * h + kv, 0.0)
    whole = (6 * h + heads + 4 * f) / tp + 2 * h + latent
    if training.checkpointing == "none":
        return whole, 0.0
    if training.checkpointing == "selective":  # block input, attention output, the matmul outputs it keeps
        kept = 1 - training.recompute_mm_share
        return (2 * h + kept * (h + 2 * kv + 2 * f)) / tp + kept * 2 * h + (2 * h / tp if tp > 1 else 0), whole
    return h / tp, whole


def _in_flight(layout: LlamaLayout, layers: int, first: bool) -> float:
    """Block-micro-batches of activations the first stage (or the last) holds at its peak: GPipe all m; 1F1B pp
    on the first, one on the last; interleaved 1F1B the warm-up torch and Megatron run, (v-1) rounds of
    micro-batches and two more per hop to the last rank, then one forward more, in chunks of layers/v blocks (for
    m >= pp the first rank's layers x (pp + (pp-1)/v): Korthikanti et al. 2022's pp micro-batches of its layers
    times 1 + (pp-1)/(pp·v))."""
    pp, v, m = layout.pp, layout.stages_per_rank, layout.accumulation_steps
    if pp == 1:
        return layers
    if layout.pp_schedule == "gpipe":
        return layers * m
    if layout.pp_schedule == "interleaved-1f1b":
        per_round = pp if m >= pp else m
        chunks = (v - 1) * per_round + (2 * (pp - 1) if first else 0) + 1
        return layers / v * min(chunks, m * v)
    return layers * min(m, pp) if first else layers


def predict_llama(
    shape: ModelShape, layout: LlamaLayout, training: Training, device: Device, net: Network
) -> LlamaPrediction:
    """Step time, its parts, MFU and memory per device (the model in the module's docstring)."""
    tp, cp, pp, v = layout.tp, layout.cp, layout.pp, layout.stages_per_rank
    dpr, m = layout.dp_replicate, layout.accumulation_steps
    layers = math.ceil(shape.layers / pp)
    tokens = layout.micro_batch_size * shape.seq / cp  # this rank's tokens of one micro-batch
    compute_last, output_s, attention, forward_share = _compute_s(shape, training, device, layers, tokens, tp)
    tp_s = _tp_s(shape, training, net, layers, tokens, tp)
    cp_s = _cp_s(shape, training, device, net, layers, tokens, layout, attention, forward_share)
    # pipeline point-to-point, per micro-batch
    p2p_s = 2 * v * net.send_s(tokens * shape.hidden / tp * training.act_bytes, tp * cp * layout.dp_shard * dpr)
    p2p_s = p2p_s if pp > 1 else 0.0
    slot = compute_last + tp_s + cp_s + p2p_s  # the last stage, the slowest, paces the pipeline
    local = _stage_params(shape, layers, pp == 1, True) / tp  # the last stage's parameters on this rank
    fsdp_s = _fsdp_s(training, net, device, layout, layers, local, compute_last, forward_share)
    optimizer_s = OPTIMIZER_BYTES_PER_PARAM * local / (layout.dp_shard * cp) / device.memory_bytes_per_s
    work = m * slot
    # the fill and drain run on the other stages, without the output layer (a stage of blocks alone)
    bubble_s = SCHEDULE_BUBBLE[layout.pp_schedule] * (pp - 1) / v * (slot - output_s) if pp > 1 else 0.0
    step = work + bubble_s + fsdp_s + optimizer_s
    time = {
        "compute": m * compute_last,
        "tp": m * tp_s,
        "cp": m * cp_s,
        "pipeline_p2p": m * p2p_s,
        "pipeline_bubble": bubble_s,
        "fsdp_dp": fsdp_s,
        "optimizer": optimizer_s,
    }
    memory, total = _memory(shape, layout, training, layers, tokens)
    world_tokens = layout.global_batch_size * shape.seq
    tokens_per_s = world_tokens / step / layout.world_size
    mfu = tokens_per_s * shape.flops_per_token / (device.peak_tflops * 1e12)
    return LlamaPrediction(step, tokens_per_s, mfu, time, memory, total, total <= device.memory_bytes,
                           device.memory_bytes)  # fmt: skip


def _compute_s(
    shape: ModelShape, training: Training, device: Device, layers: int, tokens: float, tp: int
) -> tuple[float, float, float, float]:
    """(compute seconds per micro-batch on the last stage, the slowest: it holds the output layer; the output
    layer's share of them; its attention FLOPs; the forward's share of the compute)."""
    block_mm = tokens * layers * 6 * shape.block_params / tp
    attention = tokens * layers * 12 * (shape.attention_width or shape.hidden) * shape.seq / tp  # H·Q
    output = tokens * 6 * shape.vocab * shape.hidden / tp
    if training.checkpointing == "full":
        block_mm, attention = block_mm * 4 / 3, attention * 4 / 3
    elif training.checkpointing == "selective":
        block_mm *= 1 + training.recompute_mm_share / 3
    linear_rate = device.fp8_rate if training.float8 else device.rate
    compute_last = block_mm / linear_rate + (attention + output) / device.rate
    return compute_last, output / device.rate, attention, 1 / 4 if training.checkpointing == "full" else 1 / 3


def _tp_s(shape: ModelShape, training: Training, net: Network, layers: int, tokens: float, tp: int) -> float:
    """Tensor parallelism's collectives per micro-batch."""
    act = training.act_bytes
    gathered = tokens * shape.hidden * act
    per_block = {"none": 4, "selective": 6, "full": 8}[training.checkpointing]  # all-gathers fwd+bwd(+recompute)
    ag = net.collective_s("all_gather", gathered / (2 if training.float8 and act == 2 else 1), tp, 1)
    rs = net.collective_s("reduce_scatter", gathered, tp, 1)
    tp_s = layers * (per_block * ag + (4 if training.checkpointing != "full" else 6) * rs) + 2 * (ag + rs)
    if not training.loss_parallel:  # the logits gathered whole for the loss
        tp_s += net.collective_s("all_gather", tokens * shape.vocab * act, tp, 1)
    return tp_s * (1 - ASYNC_TP_HIDDEN) if training.async_tp else tp_s


def _cp_s(
    shape: ModelShape,
    training: Training,
    device: Device,
    net: Network,
    layers: int,
    tokens: float,
    layout: LlamaLayout,
    attention: float,
    forward_share: float,
) -> float:
    """Context parallelism per micro-batch: cp-1 rounds per block forward (and recomputation), backward twice the
    bytes, each hidden behind a round's attention where communication overlaps."""
    cp, tp = layout.cp, layout.tp
    if cp <= 1:
        return 0.0
    gathered = training.cp_all_gather  # the same bytes as the ring's, none of them behind attention
    width = shape.kv_width if training.cp_kv_heads or gathered else shape.hidden  # keys' and values' heads as passed
    chunk = 2 * tokens * width / tp * training.act_bytes
    round_attention = attention / layers / cp / device.rate  # one local chunk and cp-1 passed ones
    forward_rounds = 2 if training.checkpointing == "full" else 1
    hides = 1.0 if training.overlap and not gathered else 0.0
    hidden_fwd = max(0.0, net.send_s(chunk, tp) - hides * round_attention * forward_share)
    hidden_bwd = max(0.0, net.send_s(2 * chunk, tp) - hides * round_attention * (1 - forward_share))
    return layers * (cp - 1) * (forward_rounds * hidden_fwd + hidden_bwd)


def _fsdp_s(
    training: Training,
    net: Network,
    device: Device,
    layout: LlamaLayout,
    layers: int,
    local: float,
    compute_last: float,
    forward_share: float,
) -> float:
    """FSDP's (HSDP's) gathers and reduces per step that no compute hides. Each takes its collective and FSDP2's
    copies around it at the memory bandwidth (a read and a write each): a gather copies the shard in and the
    unsharded parameters out, a reduction the unsharded fp32 gradients in and the reduced shard through the
    division; a shard group of one rank (HSDP's data parallelism) copies all the same."""
    tp, fs, dpr, m = layout.tp, layout.dp_shard * layout.cp, layout.dp_replicate, layout.accumulation_steps
    if fs * dpr == 1:
        return 0.0  # not sharded: no FSDP
    param_bytes = 4 if training.precision == "fp32" else (1.5 if training.float8 else 2)  # float8: weights 8-bit
    copies = fsdp_copies_s(local, fs, device)
    gather = net.collective_s("all_gather", local * param_bytes, fs, tp) + copies * param_bytes
    reduce = net.collective_s("reduce_scatter", local * 4, fs, tp) + copies * 4
    reduce += net.collective_s("all_reduce", local * 4 / fs, dpr, tp * fs)
    fwd_compute, bwd_compute = compute_last * forward_share, compute_last * (1 - forward_share)
    if not training.overlap:  # every gather (forward and backward of each micro-batch, or once under PP) and reduce
        return (2 * m if layout.pp == 1 else 1) * gather + reduce
    if layout.pp == 1:  # gathered forward and backward each micro-batch, reduced during the last one's backward
        fsdp_s = m * (max(0.0, gather - fwd_compute) + gather / layers) + (m - 1) * max(0.0, gather - bwd_compute)
        return fsdp_s + (max(0.0, gather + reduce - bwd_compute) + reduce / layers)
    return max(0.0, gather - m * fwd_compute) + max(0.0, reduce - bwd_compute) + (gather + reduce) / layers


def fsdp_copies_s(local: float, shards: int, device: Device) -> float:
    """Seconds per byte of a value of FSDP2's copies around one gather or reduction of `local` parameters over
    `shards` ranks: the shard and the unsharded tensors each read and written at the memory bandwidth."""
    return 2 * (local / shards + local) / device.memory_bytes_per_s


def _memory(
    shape: ModelShape, layout: LlamaLayout, training: Training, layers: int, tokens: float
) -> tuple[dict[str, float], float]:
    """(bytes per device by part, the peak) at the worse of the first and the last stage (one rank's under zbv);
    the peak is the largest of three moments of the step (see `_peak`)."""
    worst: tuple[dict[str, float], float] = ({}, -1.0)
    one_rank = layout.pp == 1 or layout.pp_schedule == "zbv"  # zbv's V puts the first and last stage on rank 0
    for first, last in {(True, one_rank), (one_rank, True)}:
        parts = _stage_memory(shape, layout, training, layers, tokens, first, last)
        peak = _peak(parts, layout.accumulation_steps)
        if peak > worst[1]:
            worst = (parts, peak)
    return worst


def _stage_memory(
    shape: ModelShape, layout: LlamaLayout, training: Training, layers: int, tokens: float, first: bool, last: bool
) -> dict[str, float]:
    """Bytes per device by part on a stage (the first, the last, or both)."""
    tp, fs, pp = layout.tp, layout.dp_shard * layout.cp, layout.pp
    compute_bytes = 4 if training.precision == "fp32" else 2
    fsdp = fs * layout.dp_replicate > 1  # FSDP2 holds the parameters wherever gradients are averaged
    local = _stage_params(shape, layers, first, last) / tp
    sharded = local / fs
    parts = {"parameters": 4 * sharded, "gradients": 4 * sharded, "optimizer": 8 * sharded}
    largest = max(shape.vocab * shape.hidden, shape.hidden * shape.ffn) / (tp * fs)
    parts["optimizer_step"] = 0.0 if training.fused_optimizer else 2 * 4 * largest
    parts["fsdp_buffers"] = _fsdp_buffers(shape, layout, local, compute_bytes) if fsdp else 0.0
    root = (2 * shape.embedding + shape.hidden) / tp if pp == 1 and fs > 1 else 0.0
    parts["fsdp_root"] = root * (compute_bytes + 4)  # embedding, norm, output: unsharded, their gradients too
    parts["autocast_copies"] = local * 2 if not fsdp and training.precision != "fp32" else 0.0
    parts["float8_copies"] = 2 * shape.block_params / tp if training.float8 else 0.0
    return parts | _activation_memory(shape, layout, training, layers, tokens, first, last)


def _activation_memory(
    shape: ModelShape, layout: LlamaLayout, training: Training, layers: int, tokens: float, first: bool, last: bool
) -> dict[str, float]:
    """A stage's activations (the first holds the most micro-batches in flight), logits (the last: one
    micro-batch's, all of them under GPipe, whose last stage runs every forward before any backward) and the CP
    and PP communication buffers."""
    tp, act = layout.tp, training.act_bytes
    kept, whole = _activations_per_token(shape, tp, training)
    last_held = layout.accumulation_steps if layout.pp > 1 and layout.pp_schedule == "gpipe" else 1
    in_flight = _in_flight(layout, layers, first)
    vocab = shape.vocab / tp if training.loss_parallel else shape.vocab
    return {
        "activations": tokens * act * (kept * in_flight + whole),
        "logits": tokens * vocab * (LOGIT_BYTES[act] + KEPT_LOGIT_BYTES * (last_held - 1)) if last else 0.0,
        "comm_buffers": tokens * shape.hidden / tp * act * (2 * (layout.cp > 1) + 2 * (layout.pp > 1)),
    }


def _fsdp_buffers(shape: ModelShape, layout: LlamaLayout, local: float, compute_bytes: int) -> float:
    """FSDP's unsharded parameters and gradients: under PP the stage between micro-batches; else two blocks, and
    the gradients accumulating unsharded until the last micro-batch reduces them."""
    if layout.pp > 1:
        return local * (compute_bytes + 4)
    buffers = 2 * shape.block_params / layout.tp * (compute_bytes + 4)
    return buffers + (local * compute_bytes if layout.accumulation_steps > 1 else 0.0)


def _peak(parts: dict[str, float], micro_batches: int) -> float:
    """The largest of: the loss (every activation and the logits alive, FSDP's root resharded after forward; the
    gradients of earlier micro-batches too), the end of backward (activations gone, the gradients whole, the root
    gathered again for backward with its unsharded gradients), the optimizer step (gradients and an unfused
    AdamW's temporaries). With one micro-batch the gradients, set to None between steps, are not there at the
    loss."""
    held = parts["parameters"] + parts["optimizer"] + parts["fsdp_buffers"] + parts["autocast_copies"]
    held += parts["float8_copies"] + parts["comm_buffers"]
    grads = parts["gradients"]
    loss = held + parts["activations"] + parts["logits"] + (grads if micro_batches > 1 else 0.0)
    end_of_backward = held + grads + parts["fsdp_root"]
    step = held + grads + parts["optimizer_step"]
    return max(loss, end_of_backward, step)
