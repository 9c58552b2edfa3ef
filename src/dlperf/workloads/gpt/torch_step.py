"""GPT pre-training on the PyTorch engine under any dp x tp x pp layout: one training iteration is one global
batch."""

from __future__ import annotations

import torch
from torch import nn

from dlperf.engines.base import TrainStep
from dlperf.engines.torch import flop_count
from dlperf.engines.torch.engine import TorchEngine
from dlperf.engines.torch.own_work import OWN_WORK, OwnWorkClock, data_phase
from dlperf.engines.torch.parameters import param_groups, parameter_facts
from dlperf.engines.torch.pipeline import Pipeline
from dlperf.engines.torch.precision import MixedPrecision, loss_value
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.gpt import parallel
from dlperf.workloads.gpt.config import ADAMW_BETAS, GPTConfig
from dlperf.workloads.gpt.layout import Layout, padded_vocab
from dlperf.workloads.gpt.model import GPT, GPTShape
from dlperf.workloads.language_model.torch_data import (
    accumulated,
    compile_blocks,
    cross_entropy,
    global_loss,
    replica_batches,
    training_step,
)


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
    batches = data_phase(own_clock, replica_batches(spec, plan, dp_rank, device))
    wrapped.train()
    if layout.pp > 1:
        run_batch = _pipeline(wrapped, layout, stage, device, mesh, amp)
    else:
        backward_done = own_clock.backward_done if own_clock else None
        run_batch = accumulated(wrapped, layout.accumulation_steps, amp, device, after_backward=backward_done)
    step = training_step(spec, device, batches, run_batch, amp, optimizer, before_step=tie_sync)

    # the global batch's mean loss, where the last stage's dp replicas (one tp rank each) contribute their share
    holds_loss = stage == layout.pp - 1 and tp_rank == 0
    read_loss = global_loss(holds_loss, layout.dp, device) if rank.distributed else loss_value

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
    compile_blocks(model, spec)


def _own_clock(model: GPT, layout: Layout, device: torch.device, rank: int) -> OwnWorkClock | None:
    """Own work is visible where one plain DDP replica holds the whole model: backward reaches pos_emb last."""
    plain = layout.tp == 1 and layout.pp == 1 and layout.dp_mode == "ddp"
    return OwnWorkClock(model, model.pos_emb.weight, device, rank) if plain else None


def _mixed_precision(spec: RunSpec, layout: Layout, device: torch.device) -> MixedPrecision:
    amp = MixedPrecision(spec.precision, device)
    if layout.tp > 1 or layout.pp > 1 or layout.dp_mode == "fsdp":
        amp.shard()  # the model is split over ranks: one inf/nan verdict for all
    return amp


def _pipeline(module: nn.Module, layout: Layout, stage: int, device: torch.device, mesh, amp: MixedPrecision):
    """This rank's pipeline stage under the planned schedule; the forward runs under autocast."""
    return Pipeline([module], [stage], layout.pp, layout.pp_schedule, layout.accumulation_steps, cross_entropy,
                    device, mesh["pp"].get_group(), scale=amp.scaler.scale if amp.scaler else None,
                    context=amp.autocast)  # fmt: skip
