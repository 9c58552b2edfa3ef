"""Llama pre-training on the PyTorch engine under any layout of the plan's mesh: one training iteration is one
global batch."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from typing import Any

import torch
from torch import nn

from dlperf.engines.base import TrainStep
from dlperf.engines.torch.engine import TorchEngine
from dlperf.engines.torch.parameters import param_groups, parameter_facts
from dlperf.engines.torch.pipeline import Pipeline, stage_ids, stage_layers
from dlperf.engines.torch.precision import MixedPrecision, loss_value
from dlperf.errors import ConfigError
from dlperf.install import extra as install
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.language_model.torch_data import (
    accumulated,
    compile_blocks,
    cross_entropy,
    global_loss,
    owned,
    replica_batches,
    training_step,
)
from dlperf.workloads.llama import FLOAT8_NEEDS_GPU, parallel
from dlperf.workloads.llama.config import ADAMW_BETAS, LlamaConfig
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.llama.model import Llama, LlamaShape, keep_stage, materialize


def model_shape(config: LlamaConfig) -> LlamaShape:
    return LlamaShape(config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads,
                      config.ffn_hidden_size, config.vocab_size, config.seq_length, config.rope_theta)  # fmt: skip


def check_device(config: LlamaConfig, layout: LlamaLayout, device: torch.device) -> None:
    """What this rank's device cannot run, in one line (the parent refuses them for an explicit --device cpu)."""
    if config.float8:
        if device.type != "cuda" or torch.cuda.get_device_capability(device) < (8, 9):
            raise ConfigError(FLOAT8_NEEDS_GPU)
        try:
            import torchao  # noqa: F401
        except ImportError:
            raise ConfigError(f"--float8 trains through torchao: {install('float8')}") from None


def build(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine) -> TrainStep:
    """This rank's stages of the model under the planned layout, its data rows, and AdamW."""
    return build_with(spec, plan, engine, build_stage)[0]


StageBuilder = Callable[[RunSpec, LlamaLayout, Any, int, torch.device], nn.Module]


def build_with(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine, stage_builder: StageBuilder,
               after_step: Callable[[list[nn.Module]], None] | None = None
               ) -> tuple[TrainStep, list[nn.Module]]:  # fmt: skip
    """The step of any decoder built stage by stage by `stage_builder` (Llama's, the MoE workload's), with its
    modules; `after_step(modules)` runs after each optimizer step (the MoE routers' bias update)."""
    config: LlamaConfig = spec.workload
    layout: LlamaLayout = plan.layout
    device, rank = engine.device, engine.rank
    check_device(config, layout, device)
    at = layout.coordinates(rank.rank)
    mesh = parallel.build_mesh(layout, device) if rank.distributed else None
    ids = stage_ids(layout.pp_schedule, at["pp"], layout.pp, layout.stages_per_rank)
    modules = [stage_builder(spec, layout, mesh, stage, device) for stage in ids]
    held = nn.ModuleList(modules)
    optimizer = torch.optim.AdamW(
        param_groups(held), lr=plan.lr, betas=ADAMW_BETAS, weight_decay=config.weight_decay, fused=device.type == "cuda"
    )
    amp = MixedPrecision(spec.precision, device)
    if rank.distributed:
        amp.shard()  # the model is split over ranks: one inf/nan verdict for all
    batches = replica_batches(spec, plan, layout.dp_rank(rank.rank), device)
    run_batch = _batch_runner(layout, modules, ids, amp, mesh, device)
    float8_gathers = config.float8 and parallel.uses_fsdp(layout)
    held.train()

    def stepped() -> None:
        if after_step:
            after_step(modules)
        if float8_gathers:
            parallel.precompute_float8_scales(modules)

    step = training_step(spec, device, batches, run_batch, amp, optimizer, after_step=stepped)

    holds_loss = layout.stages - 1 in ids and at["tp"] == 0
    read_loss = global_loss(holds_loss, layout.dp * layout.cp, device) if rank.distributed else loss_value
    return TrainStep(run=step, read_loss=read_loss, model=parameter_facts(held)), modules


def _batch_runner(layout: LlamaLayout, modules: list[Llama], ids: list[int], amp: MixedPrecision, mesh,
                  device: torch.device):  # fmt: skip
    """One global batch through this rank's stages: a pipeline schedule, or micro-batches accumulated; under
    context parallelism where planned."""
    cp = parallel.context_parallel(mesh["cp"], modules) if layout.cp > 1 else None
    if layout.pp == 1:
        return accumulated(modules[0], layout.accumulation_steps, amp, device, cp)
    scale = amp.scaler.scale if amp.scaler else None
    pipeline = Pipeline(modules, ids, layout.stages, layout.pp_schedule, layout.accumulation_steps, cross_entropy,
                        device, mesh["pp"].get_group(), scale=scale, context=amp.autocast)  # fmt: skip

    def pipelined(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        inputs, labels = owned((inputs, labels), cp is not None)
        with cp(inputs, labels) if cp else nullcontext():
            return pipeline(inputs, labels)

    return pipelined


def build_stage(spec: RunSpec, layout: LlamaLayout, mesh, stage: int, device: torch.device,
                model: Llama | None = None, split: Callable[[Llama], None] | None = None) -> Llama:  # fmt: skip
    """One pipeline stage (the whole model without PP), built on the meta device, cut to its layers, split (float8
    and TP; the MoE's `split`: its experts and TP), checkpointed, compiled and sharded as planned there, and only then
    drawn on the device, each rank its part. `model`: the MoE's, already on the meta device."""
    config: LlamaConfig = spec.workload
    if model is None:
        with torch.device("meta"):
            model = Llama(model_shape(config))
    if layout.pp > 1:
        keep_stage(model, stage_layers(config.num_layers, layout.stages, stage), stage == 0, stage == layout.stages - 1)
    (split or partial(_split, config, layout, mesh))(model)
    parallel.apply_checkpointing(model, config.activation_checkpoint)
    compile_blocks(model, spec)
    if parallel.uses_fsdp(layout):
        parallel.apply_fsdp(model, mesh, layout, torch.bfloat16 if spec.precision == "amp-bf16" else None)
    materialize(model, device, spec.seed)
    return model


def _split(config: LlamaConfig, layout: LlamaLayout, mesh, model: Llama) -> None:
    if config.float8:
        parallel.apply_float8(model, fsdp=parallel.uses_fsdp(layout))
    if layout.tp > 1:
        parallel.apply_tp(model, mesh["tp"], config.float8)
