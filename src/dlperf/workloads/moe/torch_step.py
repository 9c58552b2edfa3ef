"""MoE pre-training on the PyTorch engine: Llama's step (workloads/llama/torch_step.py: batches, micro-batches,
AdamW, the loss read at window edges) over MoE stages, experts sharded over the ep ranks where planned; after each
optimizer step the routers' counts move the expert bias (torchtitan's aux-loss-free balancing), and the routing
meter reports what the routers did over the timed window."""

from __future__ import annotations

import dataclasses
from functools import partial

import torch
from torch import nn

from dlperf.engines.base import TrainStep
from dlperf.engines.torch.engine import TorchEngine
from dlperf.errors import ConfigError
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.llama import torch_step as llama_step
from dlperf.workloads.llama.layout import LlamaLayout
from dlperf.workloads.moe import parallel
from dlperf.workloads.moe.config import MoEConfig
from dlperf.workloads.moe.meter import RoutingMeter
from dlperf.workloads.moe.model import MoEShape, MoETransformer, Routing, has_grouped_mm

SHAPE_FIELDS = [f.name for f in dataclasses.fields(MoEShape)]


def model_shape(config: MoEConfig) -> MoEShape:
    return MoEShape(**{name: getattr(config, name) for name in SHAPE_FIELDS})


def routing_of(config: MoEConfig, micro_batches: int = 1) -> Routing:
    """The routers' settings; `grouped` where asked or (auto) where this torch has grouped GEMMs. The auxiliary
    loss is each micro-batch's divided by the micro-batches, as the language model's loss is (Megatron-Core's
    MoEAuxLossAutoScaler scale): its gradient is then the same under every split of the global batch."""
    if config.experts_impl == "grouped" and not has_grouped_mm():
        raise ConfigError(f"--experts-impl grouped needs torch._grouped_mm (torch {torch.__version__} has none): "
                          "use --experts-impl loop")  # fmt: skip
    learned = config.routing == "learned"
    return Routing(
        score_func=config.score_func,
        route_norm=config.route_norm,
        route_scale=config.route_scale,
        balanced=not learned,
        expert_bias=learned and config.load_balance == "bias",
        aux_loss_coef=config.aux_loss_coef / micro_batches if learned and config.load_balance == "aux" else 0.0,
        capacity_factor=config.capacity_factor,
        grouped=config.experts_impl != "loop" and has_grouped_mm(),
    )


def build(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine) -> TrainStep:
    """Llama's step over MoE stages, with the bias update after each optimizer step and the routing meter."""
    config: MoEConfig = spec.workload
    # a pipeline scales every gradient by 1 / micro-batches itself; accumulation leaves it to each micro-batch's loss
    layout: LlamaLayout = plan.layout
    routing = routing_of(config, layout.accumulation_steps if layout.pp == 1 else 1)
    distributed = engine.rank.distributed
    meter = RoutingMeter(config, routing, distributed, engine.device)
    stage = partial(build_stage, routing=routing, ep=config.ep)
    step, modules = llama_step.build_with(spec, plan, engine, stage, after_step=meter.after_step)
    model = dict(step.model)
    meter.watch({layer: block for module in modules for layer, block in module.moe_blocks().items()}, model)
    return dataclasses.replace(step, read_loss=meter.wrap(step.read_loss), model=model, probes=(meter,))


def build_stage(spec: RunSpec, layout: LlamaLayout, mesh, stage: int, device: torch.device, *, routing: Routing,
                ep: int) -> nn.Module:  # fmt: skip
    """Llama's stage of MoE blocks, the experts split over ep and sharded before the rest is FSDP2's as Llama's."""
    with torch.device("meta"):
        model = MoETransformer(model_shape(spec.workload), routing)

    def split(model: MoETransformer) -> None:
        if ep > 1:
            param_dtype = torch.bfloat16 if spec.precision == "amp-bf16" else None
            parallel.shard_experts(model, parallel.expert_mesh(layout, ep, device), layout, param_dtype)
        if layout.tp > 1:
            parallel.apply_tp(model, mesh["tp"])

    return llama_step.build_stage(spec, layout, mesh, stage, device, model, split)
