"""GPT pre-training on the PyTorch engine under any dp x tp x pp layout: one training iteration is one global
batch."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from dlperf.engines.base import TrainStep
from dlperf.engines.torch import flop_count
from dlperf.engines.torch.engine import TorchEngine
from dlperf.engines.torch.own_work import OWN_WORK, OwnWorkClock, data_phase
from dlperf.engines.torch.parameters import grad_sync, param_groups, parameter_facts
from dlperf.engines.torch.pipeline import Pipeline
from dlperf.engines.torch.precision import MixedPrecision, loss_value
from dlperf.spec import CUDA_GRAPH_MODES, RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.gpt import parallel
from dlperf.workloads.gpt.config import ADAMW_BETAS, GPTConfig
from dlperf.workloads.gpt.layout import Layout, padded_vocab
from dlperf.workloads.gpt.model import GPT, GPTShape
from dlperf.workloads.language_model.torch_data import Batches, cross_entropy, file_batches, synthetic_batches


def model_shape(config: GPTConfig, tp: int) -> GPTShape:
    return GPTShape(
        config.num_layers, config.hidden_size, config.num_heads, config.seq_length, padded_vocab(config.vocab_size, tp)
    )


def build(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine) -> TrainStep:
    """This rank's part of the model under the planned layout, its data rows, and AdamW."""
    config: GPTConfig = spec.workload
    layout: Layout = plan.layout
    device, rank = engine.device, engine.rank
    dp_rank, stage, tp_rank = layout.coordinates(rank.rank)
    torch.manual_seed(spec.seed)  # every layout starts from the same full model
    with torch.device(device):
        model = GPT(model_shape(config, layout.tp))
    mesh = parallel.build_mesh(layout, device) if rank.distributed else None
    _split_and_compile(model, spec, layout, mesh, stage)
    own_clock = _own_clock(model, layout, device, rank.rank)
    tie_sync = parallel.TiedEmbeddingSync(layout, rank.rank, model) if layout.pp > 1 else None
    wrapped: nn.Module = model
    if layout.dp > 1:
        wrapped = parallel.apply_dp(model, mesh, layout.dp_mode, device, layout.tp, layout.pp > 1)
    optimizer = torch.optim.AdamW(
        param_groups(wrapped),
        lr=plan.lr,
        betas=ADAMW_BETAS,
        weight_decay=config.weight_decay,
        # fused kernels on CUDA (one per group: DTensor and plain parameters apart); they also keep amp-fp16's
        # inf check on the device
        fused=device.type == "cuda",
    )
    amp = _mixed_precision(spec, layout, device)
    batches = data_phase(own_clock, _replica_batches(spec, plan, dp_rank, device))
    iteration = 0
    steps = layout.accumulation_steps
    wrapped.train()
    run_pipeline = _pipeline(wrapped, layout, stage, device, mesh, amp) if layout.pp > 1 else None

    graphs = spec.compile and spec.compile_mode in CUDA_GRAPH_MODES and device.type == "cuda"

    def step() -> torch.Tensor | None:
        nonlocal iteration
        if graphs:  # a new iteration: the CUDA graphs of the blocks may reuse the previous one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        inputs, labels = batches(iteration)
        iteration += 1
        if run_pipeline is not None:
            loss = run_pipeline(inputs, labels)
            tie_sync()
        else:
            loss = torch.zeros((), device=device)
            for x, y, last in _micro_batches(inputs, labels, steps):
                with grad_sync(wrapped, last):
                    with amp.autocast():
                        micro_loss = cross_entropy(wrapped(x), y) / steps
                    amp.backward(micro_loss)
                if own_clock:
                    own_clock.backward_done()
                loss += micro_loss.detach()
        amp.step(optimizer)
        return loss

    def read_loss(loss: torch.Tensor | None) -> float | None:
        """The global batch's mean loss: one all-reduce at window edges, where the last stage's dp replicas
        (one tp rank each) contribute their share and every other rank zero."""
        if not rank.distributed:
            return loss_value(loss)
        share = torch.zeros((), device=device)
        if loss is not None and stage == layout.pp - 1 and tp_rank == 0:
            share += loss.float() / layout.dp
        dist.all_reduce(share)
        return float(share.item())

    def count_flops() -> int:
        """The whole model at the global batch, counted on the meta device: model FLOPs, so attention backward is
        counted as its math (2x forward), not a flash kernel's recompute; layout-independent like the formula."""
        with torch.device("meta"):
            meta = GPT(model_shape(config, layout.tp))
        shape = (layout.global_batch_size, config.seq_length)
        tokens = torch.zeros(shape, dtype=torch.long, device="meta")
        return flop_count.training_step_flops(meta, (tokens,), lambda logits: cross_entropy(logits, tokens))

    return TrainStep(
        run=step,
        read_loss=read_loss,
        own_clock=own_clock,
        own_measure=OWN_WORK if own_clock else "step",
        count_flops=count_flops,
        model=parameter_facts(wrapped),
        # --ablate sync: pure data parallelism's all-reduce skipped (TP's and PP's collectives are the compute)
        no_sync=wrapped.no_sync if isinstance(wrapped, nn.parallel.DistributedDataParallel) else None,
    )


def _split_and_compile(model: GPT, spec: RunSpec, layout: Layout, mesh, stage: int) -> None:
    """Keep this rank's pipeline stage and tensor-parallel shards; compile block by block where asked."""
    if layout.pp > 1:
        parallel.keep_stage(model, stage, layout.pp)
    if layout.tp > 1:
        parallel.apply_tp(model, mesh["tp"])
    if spec.compile:
        for block in model.layers.values():
            block.compile(mode=None if spec.compile_mode == "default" else spec.compile_mode)


def _own_clock(model: GPT, layout: Layout, device: torch.device, rank: int) -> OwnWorkClock | None:
    """Own work is visible where one plain DDP replica holds the whole model: backward reaches pos_emb last."""
    plain = layout.tp == 1 and layout.pp == 1 and layout.dp_mode == "ddp"
    return OwnWorkClock(model, model.pos_emb.weight, device, rank) if plain else None


def _mixed_precision(spec: RunSpec, layout: Layout, device: torch.device) -> MixedPrecision:
    amp = MixedPrecision(spec.precision, device)
    if layout.tp > 1 or layout.pp > 1 or layout.dp_mode == "fsdp":
        amp.shard()  # the model is split over ranks: one inf/nan verdict for all
    return amp


def _replica_batches(spec: RunSpec, plan: WorkloadPlan, dp_rank: int, device: torch.device) -> Batches:
    """This data-parallel replica's rows of each global batch, synthetic or read from the data file."""
    config: GPTConfig = spec.workload
    global_batch = plan.layout.global_batch_size
    rows = slice(dp_rank * plan.batch_per_device, (dp_rank + 1) * plan.batch_per_device)
    if spec.data == "synthetic":
        return synthetic_batches(global_batch, config.seq_length, config.vocab_size, spec.seed, rows, device)
    return file_batches(spec.data, global_batch, config.seq_length, config.vocab_size, rows, device)


def _micro_batches(inputs: torch.Tensor, labels: torch.Tensor, steps: int):
    """(inputs, labels, is_last) per accumulation micro-batch of this replica's rows."""
    for i, (x, y) in enumerate(zip(inputs.chunk(steps), labels.chunk(steps))):
        yield x, y, i == steps - 1


def _pipeline(module: nn.Module, layout: Layout, stage: int, device: torch.device, mesh, amp: MixedPrecision):
    """This rank's pipeline stage under the planned schedule; the forward runs under autocast."""
    return Pipeline([module], [stage], layout.pp, layout.pp_schedule, layout.accumulation_steps, cross_entropy,
                    device, mesh["pp"].get_group(), scale=amp.scaler.scale if amp.scaler else None,
                    context=amp.autocast)  # fmt: skip
